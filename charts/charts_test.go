package charts

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/osdcloud/osd/daemon/deploy"
	"github.com/osdcloud/osd/daemon/deploy/helmclient"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

var testImages = map[string]string{
	"openstack": "localhost/osd/openstack:test", "mariadb": "localhost/osd/mariadb:test", "rabbitmq": "localhost/osd/rabbitmq:test",
	"memcached": "localhost/osd/memcached:test", "coredns": "localhost/osd/coredns:test", "ovn": "localhost/osd/ovn:test", "compute": "localhost/osd/compute:test",
}

var strictDecoder = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

// decodeObject decodes a rendered object strictly into its Kubernetes type.
func decodeObject(t *testing.T, o object) runtime.Object {
	t.Helper()
	doc, err := json.Marshal(o.raw)
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := strictDecoder.Decode(doc, nil, nil)
	if err != nil {
		t.Fatalf("decode %s/%s: %v", o.Kind, o.Metadata.Name, err)
	}
	return obj
}

// checkPlaceholders checks that rendered values carry no secret: every value whose key
// matches secretish, and every password in a URL, is a @@NAME@@ placeholder.
func checkPlaceholders(t *testing.T, vals map[string]any, secretish *regexp.Regexp) {
	t.Helper()
	urlPass := regexp.MustCompile(`://[^:/@]+:(.*)@[^@]+$`)
	whole := regexp.MustCompile(`^@@[A-Z0-9_]+@@$`)
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				walk(path+"."+k, e)
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		case string:
			if secretish.MatchString(path[strings.LastIndex(path, ".")+1:]) && !placeholderRE.MatchString(v) {
				t.Errorf("values %s = %q, want a @@NAME@@ placeholder", path, v)
			}
			if m := urlPass.FindStringSubmatch(v); m != nil && !whole.MatchString(m[1]) {
				t.Errorf("values %s carries a URL password %q, want a placeholder", path, m[1])
			}
		}
	}
	walk("", vals)
}

// podContainers lists a pod's init containers then its containers.
func podContainers(pod corev1.PodSpec) []corev1.Container {
	return append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...)
}

type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	raw map[string]any
}

// render renders a chart the way the controller does (deploy.Render over the chart's own
// defaults, then Helm) and parses every document.
func render(t *testing.T, fsys fs.FS, chart string, svc deploy.Service, spec deploy.DeploymentSpec) ([]object, string) {
	t.Helper()
	ch, _, err := helmclient.LoadChart(fsys, chart)
	if err != nil {
		t.Fatalf("LoadChart(%s) error = %v", chart, err)
	}
	vals, err := deploy.Render(spec, svc, ch.Values)
	if err != nil {
		t.Fatalf("Render(%s) error = %v", chart, err)
	}
	out, err := helmclient.Template(context.Background(), ch, svc.Namespace, svc.Name, deploy.HelmValues(vals, ch.Values))
	if err != nil {
		t.Fatalf("Template(%s) error = %v", chart, err)
	}
	if strings.Contains(out, "Error:") {
		t.Fatalf("Template(%s) contains a template error:\n%s", chart, out)
	}
	var objs []object
	for _, doc := range strings.Split(out, "\n---\n") {
		if strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(doc), "---")) == "" {
			continue
		}
		var o object
		if err := yaml.UnmarshalStrict([]byte(doc), &o.raw); err != nil {
			t.Fatalf("Template(%s) document does not parse: %v\n%s", chart, err, doc)
		}
		if o.raw == nil {
			continue
		}
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatal(err)
		}
		// Strict decoding into the Kubernetes types: unknown or mistyped fields fail here
		// rather than being dropped (or refused) by the API server.
		if _, _, err := strictDecoder.Decode([]byte(doc), nil, nil); err != nil {
			t.Fatalf("Template(%s) %s/%s is not a valid Kubernetes object: %v", chart, o.Kind, o.Metadata.Name, err)
		}
		objs = append(objs, o)
	}
	return objs, out
}

func kinds(objs []object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Kind+"/"+o.Metadata.Name)
	}
	sort.Strings(out)
	return out
}

func podSpec(o object) map[string]any {
	spec, _ := o.raw["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	pod, _ := tmpl["spec"].(map[string]any)
	return pod
}

// containers returns every container and init container of a workload.
func containers(o object) []map[string]any {
	pod := podSpec(o)
	if pod == nil {
		return nil
	}
	var out []map[string]any
	for _, key := range []string{"initContainers", "containers"} {
		list, _ := pod[key].([]any)
		for _, c := range list {
			out = append(out, c.(map[string]any))
		}
	}
	return out
}

func TestChartsRender(t *testing.T) {
	cat := deploy.DefaultCatalog()
	spec := deploy.DeploymentSpec{Images: testImages}
	tests := []struct {
		chart string
		want  []string // Kind/name prefixes that must be present
	}{
		{chart: "coredns", want: []string{"ClusterRole/osd:coredns", "ClusterRoleBinding/osd:coredns", "ConfigMap/coredns", "Deployment/coredns", "Service/kube-dns", "ServiceAccount/coredns"}},
		{chart: "mariadb", want: []string{"Service/mariadb", "Service/mariadb-headless", "StatefulSet/mariadb"}},
		{chart: "rabbitmq", want: []string{"ConfigMap/rabbitmq", "Service/rabbitmq", "Service/rabbitmq-headless", "StatefulSet/rabbitmq"}},
		{chart: "memcached", want: []string{"Deployment/memcached", "Service/memcached"}},
		{chart: "keystone", want: []string{"Deployment/keystone-api", "Job/keystone-init-", "Secret/keystone-config", "Service/keystone-api"}},
		{chart: "glance", want: []string{"Deployment/glance-api", "Job/glance-init-", "Secret/glance-config", "Service/glance-api"}},
		{chart: "placement", want: []string{"Deployment/placement-api", "Job/placement-init-", "Secret/placement-config", "Service/placement-api"}},
	}
	for _, tt := range tests {
		t.Run(tt.chart, func(t *testing.T) {
			svc, ok := cat.Service(tt.chart)
			if !ok {
				t.Fatalf("catalog has no %s", tt.chart)
			}
			objs, _ := render(t, FS, tt.chart, svc, spec)
			got := kinds(objs)
			for _, w := range tt.want {
				found := false
				for _, g := range got {
					if strings.HasPrefix(g, w) {
						found = true
					}
				}
				if !found {
					t.Errorf("Template(%s) kinds = %v, want one %s", tt.chart, got, w)
				}
			}
			if len(got) != len(tt.want) {
				t.Errorf("Template(%s) = %d objects %v, want %d", tt.chart, len(got), got, len(tt.want))
			}
			for _, o := range objs {
				if pod := podSpec(o); pod != nil && tt.chart != "coredns" {
					sc, _ := pod["securityContext"].(map[string]any)
					if sc["runAsNonRoot"] != true || sc["runAsUser"] == nil {
						t.Errorf("%s/%s pod securityContext = %v, want a non-root service user", o.Kind, o.Metadata.Name, sc)
					}
				}
				for _, c := range containers(o) {
					if c["imagePullPolicy"] != "Never" {
						t.Errorf("%s/%s container %v imagePullPolicy = %v, want Never", o.Kind, o.Metadata.Name, c["name"], c["imagePullPolicy"])
					}
					img, _ := c["image"].(string)
					if !strings.HasPrefix(img, "localhost/osd/") {
						t.Errorf("%s/%s container %v image = %q, want one of spec.images", o.Kind, o.Metadata.Name, c["name"], img)
					}
				}
			}
		})
	}
}

func TestCoreDNS(t *testing.T) {
	svc, _ := deploy.DefaultCatalog().Service("coredns")
	objs, out := render(t, FS, "coredns", svc, deploy.DeploymentSpec{Images: testImages})
	for _, o := range objs {
		if o.Kind == "Service" {
			if ip := o.raw["spec"].(map[string]any)["clusterIP"]; ip != "10.43.0.10" {
				t.Errorf("kube-dns clusterIP = %v, want 10.43.0.10", ip)
			}
		}
		if o.Kind != "ClusterRole" && o.Kind != "ClusterRoleBinding" && o.Metadata.Namespace != "kube-system" {
			t.Errorf("%s/%s namespace = %q, want kube-system", o.Kind, o.Metadata.Name, o.Metadata.Namespace)
		}
	}
	for _, want := range []string{"kubernetes cluster.local in-addr.arpa ip6.arpa", "forward . /etc/resolv.conf", "dnsPolicy: Default", "/coredns"} {
		if !strings.Contains(out, want) {
			t.Errorf("coredns manifests lack %q", want)
		}
	}
}

func TestMariaDBPersistence(t *testing.T) {
	svc, _ := deploy.DefaultCatalog().Service("mariadb")
	_, out := render(t, FS, "mariadb", svc, deploy.DeploymentSpec{Images: testImages})
	if !strings.Contains(out, "path: /var/lib/osd/volumes/mariadb") || !strings.Contains(out, "--innodb-buffer-pool-size=64M") {
		t.Errorf("mariadb manifests lack the default hostPath or server options")
	}
	spec := deploy.DeploymentSpec{Images: testImages, Services: map[string]deploy.ServiceSpec{"mariadb": {Overrides: map[string]any{"persistence": map[string]any{"hostPath": ""}}}}}
	_, out = render(t, FS, "mariadb", svc, spec)
	if strings.Contains(out, "hostPath:") || !strings.Contains(out, "emptyDir: {}") {
		t.Errorf("mariadb with persistence.hostPath \"\" still uses a hostPath")
	}
}

// TestRabbitMQEnv checks the Erlang VM's sizing in rabbitmq-env.conf (sourced by the
// image's rabbitmq-server script before it sets +P): a process table of 131072 slots
// instead of RabbitMQ's 1048576, which the VM allocates and touches whole (~11 MiB).
func TestRabbitMQEnv(t *testing.T) {
	svc, _ := deploy.DefaultCatalog().Service("rabbitmq")
	for _, tc := range []struct {
		name      string
		overrides map[string]any
		want      string
	}{
		{name: "default", want: "MAX_NUMBER_OF_PROCESSES=131072"},
		{name: "override", overrides: map[string]any{"maxProcesses": 262144}, want: "MAX_NUMBER_OF_PROCESSES=262144"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := deploy.DeploymentSpec{Images: testImages, Services: map[string]deploy.ServiceSpec{"rabbitmq": {Overrides: tc.overrides}}}
			objs, _ := render(t, FS, "rabbitmq", svc, spec)
			var env string
			for _, o := range objs {
				if o.Kind == "ConfigMap" && o.Metadata.Name == "rabbitmq" {
					env, _ = o.raw["data"].(map[string]any)["rabbitmq-env.conf"].(string)
				}
			}
			lines := strings.Split(strings.TrimSpace(env), "\n")
			if !slices.Contains(lines, tc.want) || !slices.Contains(lines, "NODENAME=rabbit@localhost") {
				t.Errorf("rabbitmq-env.conf = %q, want lines %q and NODENAME=rabbit@localhost", env, tc.want)
			}
		})
	}
	for _, bad := range []any{0, 1000, -5, "lots", 1 << 30} {
		spec := deploy.DeploymentSpec{Images: testImages, Services: map[string]deploy.ServiceSpec{"rabbitmq": {Overrides: map[string]any{"maxProcesses": bad}}}}
		err := hhRenderError(t, "rabbitmq", spec)
		if err == nil || !strings.Contains(err.Error(), "maxProcesses is") || !strings.Contains(err.Error(), "from 1024") {
			t.Errorf("maxProcesses %v: render error = %v, want one naming the value and the range", bad, err)
		}
	}
}

// TestKeystone checks the uwsgi facts, the config checksum and that the chart's INI equals
// deploy.RenderINI of the same values.
func TestKeystone(t *testing.T) {
	svc, _ := deploy.DefaultCatalog().Service("keystone")
	spec := deploy.DeploymentSpec{Images: testImages}
	objs, out := render(t, FS, "keystone", svc, spec)
	ch, _, _ := helmclient.LoadChart(FS, "keystone")
	vals, _ := deploy.Render(spec, svc, ch.Values)
	conf := vals["conf"].(map[string]any)
	var secret, deployment, job object
	for _, o := range objs {
		switch o.Kind {
		case "Secret":
			secret = o
		case "Deployment":
			deployment = o
		case "Job":
			job = o
		}
	}
	data := secret.raw["stringData"].(map[string]any)
	for file, key := range map[string]string{"keystone.conf": "keystone", "uwsgi.ini": "uwsgi"} {
		want, err := deploy.RenderINI(sections(t, conf[key]))
		if err != nil {
			t.Fatal(err)
		}
		if data[file] != want {
			t.Errorf("keystone-config %s =\n%s\nwant (deploy.RenderINI)\n%s", file, data[file], want)
		}
	}
	uw := data["uwsgi.ini"].(string)
	for _, want := range []string{"http11-socket = :5000", "add-header = Connection: close", "processes = 1", "threads = 4", "wsgi-file = /usr/bin/keystone-wsgi-public"} {
		if !strings.Contains(uw, want) {
			t.Errorf("uwsgi.ini lacks %q:\n%s", want, uw)
		}
	}
	if strings.Contains(out, "@@DB_PASSWORD@@") == false || strings.Count(out, `printf 's|@@%s@@|%s|g\n' DB_PASSWORD "${DB_PASSWORD}" >> "$script"`) < 2 {
		t.Errorf("keystone manifests lack the DB_PASSWORD placeholder and its render step")
	}
	for _, want := range []string{"nodePort: 30500", "db_sync", "--bootstrap-admin-url", "http://keystone-api.openstack.svc:5000/v3", "OS_BOOTSTRAP_PASSWORD", "secretName: keystone-fernet-keys", "CREATE DATABASE IF NOT EXISTS"} {
		if !strings.Contains(out, want) {
			t.Errorf("keystone manifests lack %q", want)
		}
	}
	var names []string
	for _, c := range containers(job) {
		names = append(names, c["name"].(string))
	}
	if got := strings.Join(names, ","); got != "config-render,db-create,db-sync,bootstrap" {
		t.Errorf("keystone-init steps = %s, want config-render,db-create,db-sync,bootstrap", got)
	}
	if job.raw["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["restartPolicy"] != "Never" {
		t.Errorf("keystone-init restartPolicy is not Never")
	}

	// A values change changes the pod checksum and the Job name; the same values do not.
	sum := func(o object) string {
		return fmt.Sprint(o.raw["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)["annotations"])
	}
	objs2, _ := render(t, FS, "keystone", svc, spec)
	spec.Services = map[string]deploy.ServiceSpec{"keystone": {Overrides: map[string]any{"conf": map[string]any{"keystone": map[string]any{"DEFAULT": map[string]any{"debug": true}}}}}}
	objs3, out3 := render(t, FS, "keystone", svc, spec)
	if !strings.Contains(out3, "debug = true") {
		t.Errorf("override conf.keystone.DEFAULT.debug not rendered")
	}
	for i := range objs {
		if objs[i].Kind == "Deployment" {
			if sum(objs2[i]) != sum(deployment) {
				t.Errorf("checksum changed without a values change")
			}
			if sum(objs3[i]) == sum(deployment) {
				t.Errorf("checksum unchanged after a config change: %s", sum(objs3[i]))
			}
		}
		if objs[i].Kind == "Job" && (objs2[i].Metadata.Name != job.Metadata.Name || objs3[i].Metadata.Name == job.Metadata.Name) {
			t.Errorf("Job names %s, %s, %s: want stable for same values, new for changed", job.Metadata.Name, objs2[i].Metadata.Name, objs3[i].Metadata.Name)
		}
	}
}

func sections(t *testing.T, v any) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for k, s := range v.(map[string]any) {
		out[k] = s.(map[string]any)
	}
	return out
}

// TestLibraryTemplates renders the test chart that uses the Keystone registration step.
func TestLibraryTemplates(t *testing.T) {
	fsys := os.DirFS(".")
	// The test chart sits in testdata/ and refers to ../osd-lib: serve both from one FS.
	tfs := mergedFS{base: fsys, prefix: "testdata/"}
	svc := deploy.Service{Name: "libuser", Namespace: "openstack", Images: []string{"openstack"}}
	objs, out := render(t, tfs, "libuser", svc, deploy.DeploymentSpec{Images: testImages})
	got := strings.Join(kinds(objs), " ")
	if !strings.HasPrefix(got, "ConfigMap/checksum Job/glance-init-") || !strings.HasSuffix(got, "Secret/glance-config") {
		t.Fatalf("libuser kinds = %s", got)
	}
	for _, want := range []string{"def register():", "- register\n", "name: ENDPOINT_PUBLIC\n", "value: http://10.0.0.1:30292\n", "value: http://glance-api:9292\n", `"[DEFAULT]\ndebug = true\nworkers = 2\n\n[database]\nconnection = mysql+pymysql://glance:@@DB_PASSWORD@@@mariadb/glance\n"`} {
		if !strings.Contains(out, want) {
			t.Errorf("libuser manifests lack %q", want)
		}
	}
	// The service user gets the service role besides admin by default: without it Cinder
	// takes Nova's token for a user's and refuses to delete the attachment of a volume a
	// server still has (409), so a detached volume stays "detaching" for good.
	for _, want := range []string{"name: SVC_ROLES\n", "value: admin,service\n", `wanted = [r for r in env("SVC_ROLES", "admin,service").split(",") if r]`} {
		if !strings.Contains(out, want) {
			t.Errorf("libuser's keystone registration lacks %s", want)
		}
	}
	if strings.Contains(out, "unexpected: resources") {
		t.Errorf("osd-lib.resources rendered a block for a component without resources")
	}
}

// mergedFS serves name from prefix+name when it exists there, else from base.
type mergedFS struct {
	base   fs.FS
	prefix string
}

func (m mergedFS) Open(name string) (fs.File, error) {
	if f, err := m.base.Open(m.prefix + name); err == nil {
		return f, nil
	}
	return m.base.Open(name)
}

// TestStrictDecoder guards the validation above: a misspelt field must be refused.
func TestStrictDecoder(t *testing.T) {
	doc := "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\nspec:\n  clusterIp: 10.43.0.10\n"
	if _, _, err := strictDecoder.Decode([]byte(doc), nil, nil); err == nil || !strings.Contains(err.Error(), "clusterIp") {
		t.Fatalf("strict Decode(misspelt field) error = %v, want unknown field clusterIp", err)
	}
}
