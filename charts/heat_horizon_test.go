package charts

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/deploy"
	"github.com/osdcloud/osd/daemon/deploy/helmclient"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// heatHorizonFS is FS when it embeds the heat and horizon charts, else the charts
// directory on disk (same layout: each chart and osd-lib at the top level).
func heatHorizonFS(t *testing.T) fs.FS {
	t.Helper()
	if _, err := fs.Stat(FS, "heat/Chart.yaml"); err == nil {
		if _, err := fs.Stat(FS, "horizon/Chart.yaml"); err == nil {
			return FS
		}
	}
	t.Log("charts.FS does not embed heat and horizon yet: rendering them from the directory")
	return os.DirFS(".")
}

// hhObjects holds a multi-workload chart's objects decoded into the Kubernetes types.
type hhObjects struct {
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
	secrets     map[string]*corev1.Secret
	jobs        []*batchv1.Job
}

// hhRender renders chart as the controller does and decodes every object strictly.
// It returns the objects, the manifests and the rendered values.
func hhRender(t *testing.T, chart string, spec deploy.DeploymentSpec) (hhObjects, string, map[string]any) {
	t.Helper()
	svc, ok := deploy.DefaultCatalog().Service(chart)
	if !ok {
		t.Fatalf("catalog has no %s", chart)
	}
	fsys := heatHorizonFS(t)
	objs, out := render(t, fsys, chart, svc, spec)
	ch, _, err := helmclient.LoadChart(fsys, chart)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := deploy.Render(spec, svc, ch.Values)
	if err != nil {
		t.Fatal(err)
	}
	co := hhObjects{deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{}, secrets: map[string]*corev1.Secret{}}
	for _, o := range objs {
		obj := decodeObject(t, o)
		switch v := obj.(type) {
		case *appsv1.Deployment:
			co.deployments[v.Name] = v
		case *corev1.Service:
			co.services[v.Name] = v
		case *corev1.Secret:
			co.secrets[v.Name] = v
		case *batchv1.Job:
			co.jobs = append(co.jobs, v)
		default:
			t.Fatalf("%s renders an unexpected %T %s", chart, obj, o.Metadata.Name)
		}
	}
	return co, out, vals
}

// hhRenderError renders chart with spec and returns Helm's error (nil when it renders).
func hhRenderError(t *testing.T, chart string, spec deploy.DeploymentSpec) error {
	t.Helper()
	svc, _ := deploy.DefaultCatalog().Service(chart)
	ch, _, err := helmclient.LoadChart(heatHorizonFS(t), chart)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := deploy.Render(spec, svc, ch.Values)
	if err != nil {
		t.Fatal(err)
	}
	_, err = helmclient.Template(context.Background(), ch, svc.Namespace, svc.Name, deploy.HelmValues(vals, ch.Values))
	return err
}

func hhOverrides(chart string, o map[string]any) deploy.DeploymentSpec {
	return deploy.DeploymentSpec{Images: testImages, Services: map[string]deploy.ServiceSpec{chart: {Overrides: o}}}
}

func hhNames(cs []corev1.Container) []string {
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	return names
}

func hhEnv(t *testing.T, c *corev1.Container, name string) string {
	t.Helper()
	e := envByName(c, name)
	if e == nil {
		t.Errorf("%s has no env %s", c.Name, name)
		return ""
	}
	return e.Value
}

func hhSecretRef(c *corev1.Container, name string) string {
	e := envByName(c, name)
	if e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
		return ""
	}
	return e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
}

// hhScript returns the script of a /bin/sh -ec step and checks its syntax with sh -n.
func hhScript(t *testing.T, c *corev1.Container) string {
	t.Helper()
	if len(c.Command) != 3 || c.Command[0] != "/bin/sh" || c.Command[1] != "-ec" {
		t.Fatalf("%s command = %v, want /bin/sh -ec SCRIPT", c.Name, c.Command)
	}
	if sh, err := exec.LookPath("sh"); err == nil {
		if b, err := exec.Command(sh, "-n", "-c", c.Command[2]).CombinedOutput(); err != nil {
			t.Errorf("sh -n %s script: %v\n%s", c.Name, err, b)
		}
	}
	return c.Command[2]
}

// hhParseINI reads an INI file with Python's configparser (strict: duplicate sections or
// keys fail) and returns section -> key -> value, DEFAULT included.
func hhParseINI(t *testing.T, data string) map[string]map[string]string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is not installed (test/deps.sh installs it): %v", err)
	}
	const script = `import configparser, json, sys
c = configparser.RawConfigParser(strict=True, interpolation=None)
c.optionxform = str
c.read_string(sys.stdin.read())
out = {"DEFAULT": dict(c.defaults())}
for s in c.sections():
    out[s] = {k: v for k, v in c._sections[s].items()}
print(json.dumps(out))`
	cmd := exec.Command(py, "-c", script)
	cmd.Stdin = strings.NewReader(data)
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("configparser(%q): %v", data, err)
	}
	var out map[string]map[string]string
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// hhPythonSettings executes a local_settings.py with python3 (after ast.parse) and returns its
// upper-case names as JSON values.
func hhPythonSettings(t *testing.T, data string) map[string]any {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is not installed (test/deps.sh installs it): %v", err)
	}
	const script = `import ast, json, sys
src = sys.stdin.read()
ast.parse(src)
ns = {}
exec(compile(src, "local_settings.py", "exec"), ns)
print(json.dumps({k: v for k, v in ns.items() if k.isupper()}))`
	cmd := exec.Command(py, "-c", script)
	cmd.Stdin = strings.NewReader(data)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3 local_settings.py: %v\n%s\n%s", err, stderr.String(), data)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func hhMount(c *corev1.Container, path string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == path {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

func hhVolume(pod corev1.PodSpec, name string) *corev1.Volume {
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == name {
			return &pod.Volumes[i]
		}
	}
	return nil
}

func hhCheckUser(t *testing.T, what string, pod corev1.PodSpec, uid int64) {
	t.Helper()
	sc := pod.SecurityContext
	if sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != uid || sc.RunAsGroup == nil || *sc.RunAsGroup != uid ||
		sc.FSGroup == nil || *sc.FSGroup != uid || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("%s securityContext = %+v, want non-root uid/gid/fsGroup %d", what, sc, uid)
	}
	for _, c := range podContainers(pod) {
		if c.Image != testImages["openstack"] || c.ImagePullPolicy != corev1.PullNever {
			t.Errorf("%s %s image %s pull %s, want %s Never", what, c.Name, c.Image, c.ImagePullPolicy, testImages["openstack"])
		}
		if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
			t.Errorf("%s %s overrides the pod user", what, c.Name)
		}
	}
}

func hhCheckNodePort(t *testing.T, s *corev1.Service, port, nodePort int32, selector map[string]string) {
	t.Helper()
	if s == nil {
		t.Fatalf("Service missing, want port %d nodePort %d", port, nodePort)
	}
	if s.Spec.Type != corev1.ServiceTypeNodePort || len(s.Spec.Ports) != 1 {
		t.Fatalf("Service %s type %s ports %v, want one NodePort", s.Name, s.Spec.Type, s.Spec.Ports)
	}
	p := s.Spec.Ports[0]
	if p.Port != port || p.TargetPort.IntValue() != int(port) || p.NodePort != nodePort {
		t.Errorf("Service %s port = %d -> %s nodePort %d, want %d -> %d nodePort %d", s.Name, p.Port, p.TargetPort.String(), p.NodePort, port, port, nodePort)
	}
	if !reflect.DeepEqual(s.Spec.Selector, selector) {
		t.Errorf("Service %s selector = %v, want the Deployment's %v", s.Name, s.Spec.Selector, selector)
	}
}

func hhCheckProbes(t *testing.T, c *corev1.Container, path string, port int) {
	t.Helper()
	for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.IntValue() != port {
			t.Errorf("%s %s probe = %+v, want GET %s on %d", c.Name, name, p, path, port)
		}
	}
}

// hhGenerated is every Secret/key deploy.DefaultSecrets makes.
func hhGenerated() map[string]deploy.KeyFormat {
	out := map[string]deploy.KeyFormat{}
	for _, s := range deploy.DefaultSecrets() {
		for k, f := range s.Keys {
			out[s.Name+"/"+k] = f
		}
	}
	return out
}

// hhCheckSecretRefs checks that every Secret reference of pod names a generated Secret and
// key, and that no PASSWORD/SECRET/KEY variable is a literal.
func hhCheckSecretRefs(t *testing.T, what string, pod corev1.PodSpec) {
	t.Helper()
	generated := hhGenerated()
	for _, c := range podContainers(pod) {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				ref := e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
				if _, ok := generated[ref]; !ok {
					t.Errorf("%s %s env %s refers to %s, which deploy.DefaultSecrets() does not make", what, c.Name, e.Name, ref)
				}
			} else if strings.Contains(e.Name, "PASSWORD") || strings.HasSuffix(e.Name, "_KEY") || strings.Contains(e.Name, "SECRET") {
				t.Errorf("%s %s env %s is a literal", what, c.Name, e.Name)
			}
		}
	}
}

// hhConfigRender runs the pod's config-render step over the config Secret's files and
// checks that no placeholder is left; it returns the rendered files and the values used.
func hhConfigRender(t *testing.T, what string, pod corev1.PodSpec, files map[string]string, secrets hhSecrets) (map[string]string, map[string]string) {
	t.Helper()
	if _, err := exec.LookPath("sed"); err != nil {
		t.Fatalf("sed is not installed: %v", err)
	}
	render := containerByName(pod.InitContainers, "config-render")
	if render == nil {
		t.Fatalf("%s has no config-render step", what)
	}
	dir, values := hhRunConfigRender(t, render, files, secrets)
	out := map[string]string{}
	for name, data := range files {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		want := placeholderRE.ReplaceAllStringFunc(data, func(p string) string {
			v, ok := values[placeholderRE.FindStringSubmatch(p)[1]]
			if !ok {
				t.Errorf("%s %s: placeholder %s has no config-render env", what, name, p)
			}
			return v
		})
		if string(got) != want || strings.Contains(string(got), "@@") {
			t.Errorf("%s config-render %s =\n%s\nwant\n%s", what, name, got, want)
		}
		out[name] = string(got)
	}
	return out, values
}

// heatDeployment is one of the heat chart's workloads: its command ("" in place of a
// python3 -c program), HTTP ports (none: the engine alone, with an exec probe) and selector
// component.
type heatDeployment struct {
	name      string
	command   []string
	ports     []int32
	component string
}

// heatDeployments: with one replica, heat-api, heat-api-cfn and heat-engine run in one
// process, heat-server (files/heat-server.py), serving both APIs, started at the first API
// request (onDemand, the default).
var heatDeployments = []heatDeployment{
	{name: "heat-server", command: []string{"/usr/bin/python3", "-c", "", "--on-demand", "--config-file", "/etc/heat/heat.conf"}, ports: []int32{8004, 8000}, component: "server"},
}

// heatHADeployments: with more replicas (the HA profile), each service is a Deployment.
var heatHADeployments = []heatDeployment{
	{name: "heat-api", command: []string{"heat-api", "--config-file", "/etc/heat/heat.conf"}, ports: []int32{8004}, component: "api"},
	{name: "heat-api-cfn", command: []string{"heat-api-cfn", "--config-file", "/etc/heat/heat.conf"}, ports: []int32{8000}, component: "api-cfn"},
	{name: "heat-engine", command: []string{"heat-engine", "--config-file", "/etc/heat/heat.conf"}, component: "engine"},
}

// heatServices: the API Services, port and NodePort.
var heatServices = []struct {
	name           string
	port, nodePort int32
}{{"heat-api", 8004, 30004}, {"heat-api-cfn", 8000, 30000}}

var heatSteps = []string{"config-render", "db-create", "db-sync", "keystone-register", "keystone-register-cfn", "stack-domain"}

// effectiveHeatConf is conf.heat as the chart renders it (the metadata and wait-condition
// URLs follow endpoints.cfn.public unless conf sets them).
func effectiveHeatConf(t *testing.T, vals map[string]any) map[string]map[string]any {
	t.Helper()
	conf := sections(t, deploy.Merge(vals["conf"].(map[string]any))["heat"])
	cfn := strings.TrimSuffix(vals["endpoints"].(map[string]any)["cfn"].(map[string]any)["public"].(string), "/")
	if conf["DEFAULT"]["heat_metadata_server_url"] == nil {
		conf["DEFAULT"]["heat_metadata_server_url"] = cfn
	}
	if conf["DEFAULT"]["heat_waitcondition_server_url"] == nil {
		conf["DEFAULT"]["heat_waitcondition_server_url"] = cfn + "/v1/waitcondition"
	}
	return conf
}

func TestHeatChart(t *testing.T) {
	objs, _, vals := hhRender(t, "heat", deploy.DeploymentSpec{Images: testImages})
	if len(objs.deployments) != 1 || len(objs.services) != 2 || len(objs.jobs) != 1 || len(objs.secrets) != 1 || objs.secrets["heat-config"] == nil {
		t.Fatalf("heat renders %d Deployments, %d Services, %d Jobs, Secrets %v; want 1, 2, 1 and heat-config", len(objs.deployments), len(objs.services), len(objs.jobs), objs.secrets)
	}
	job := objs.jobs[0]
	conf := objs.secrets["heat-config"].StringData

	t.Run("heat.conf", func(t *testing.T) {
		if len(conf) != 1 {
			t.Fatalf("heat-config files = %v, want heat.conf only", conf)
		}
		want, err := deploy.RenderINI(effectiveHeatConf(t, vals))
		if err != nil {
			t.Fatal(err)
		}
		if conf["heat.conf"] != want {
			t.Errorf("heat.conf =\n%s\nwant (deploy.RenderINI)\n%s", conf["heat.conf"], want)
		}
		ini := hhParseINI(t, conf["heat.conf"])
		for _, kv := range []struct{ section, key, want string }{
			{"DEFAULT", "transport_url", "rabbit://heat:@@HEAT_RABBITMQ_PASSWORD@@@rabbitmq.openstack.svc:5672/heat"},
			{"DEFAULT", "num_engine_workers", "1"},
			{"DEFAULT", "stack_user_domain_name", "heat"},
			{"DEFAULT", "stack_domain_admin", "heat_domain_admin"},
			{"DEFAULT", "stack_domain_admin_password", "@@HEAT_DOMAIN_PASSWORD@@"},
			{"DEFAULT", "auth_encryption_key", "@@HEAT_AUTH_ENCRYPTION_KEY@@"},
			{"DEFAULT", "heat_metadata_server_url", "http://127.0.0.1:30000"},
			{"DEFAULT", "heat_waitcondition_server_url", "http://127.0.0.1:30000/v1/waitcondition"},
			{"heat_api", "bind_port", "8004"},
			{"heat_api", "workers", "1"},
			{"heat_api_cfn", "bind_port", "8000"},
			{"heat_api_cfn", "workers", "1"},
			{"database", "connection", "mysql+pymysql://heat:@@HEAT_DB_PASSWORD@@@mariadb.openstack.svc/heat"},
			{"keystone_authtoken", "auth_url", "http://keystone-api.openstack.svc:5000/v3"},
			{"keystone_authtoken", "www_authenticate_uri", "http://127.0.0.1:30500/v3"},
			{"keystone_authtoken", "username", "heat"},
			{"keystone_authtoken", "password", "@@HEAT_KEYSTONE_PASSWORD@@"},
			{"keystone_authtoken", "memcached_servers", "memcached:11211"},
			{"trustee", "auth_type", "password"},
			{"trustee", "auth_url", "http://keystone-api.openstack.svc:5000/v3"},
			{"trustee", "username", "heat"},
			{"trustee", "password", "@@HEAT_KEYSTONE_PASSWORD@@"},
			{"trustee", "user_domain_name", "Default"},
			{"clients_keystone", "auth_uri", "http://keystone-api.openstack.svc:5000"},
			{"clients", "endpoint_type", "internalURL"},
			{"paste_deploy", "api_paste_config", "/etc/heat/api-paste.ini"},
		} {
			if got, ok := ini[kv.section][kv.key]; !ok || got != kv.want {
				t.Errorf("heat.conf [%s] %s = %q (present %v), want %q", kv.section, kv.key, got, ok, kv.want)
			}
		}
		// The stack domain the init Job creates is the one heat.conf names.
		sd := vals["stackDomain"].(map[string]any)
		if ini["DEFAULT"]["stack_user_domain_name"] != sd["name"] || ini["DEFAULT"]["stack_domain_admin"] != sd["admin"] {
			t.Errorf("heat.conf stack domain %s/%s, values.stackDomain %v: want the same", ini["DEFAULT"]["stack_user_domain_name"], ini["DEFAULT"]["stack_domain_admin"], sd)
		}
	})

	t.Run("deployments", func(t *testing.T) {
		ha, _, _ := hhRender(t, "heat", deploy.DeploymentSpec{Images: testImages, Profile: deploy.ProfileHA})
		for _, layout := range []struct {
			name     string
			objs     hhObjects
			replicas int32
			want     []heatDeployment
		}{{"one replica", objs, 1, heatDeployments}, {"HA", ha, 3, heatHADeployments}} {
			if len(layout.objs.deployments) != len(layout.want) {
				t.Errorf("%s: %d Deployments, want %d", layout.name, len(layout.objs.deployments), len(layout.want))
			}
			byPort := map[int32]*appsv1.Deployment{}
			for _, d := range layout.want {
				dep := layout.objs.deployments[d.name]
				if dep == nil {
					t.Errorf("%s: no Deployment %s", layout.name, d.name)
					continue
				}
				pod := dep.Spec.Template.Spec
				hhCheckUser(t, d.name, pod, 904)
				if *dep.Spec.Replicas != layout.replicas || dep.Spec.Selector.MatchLabels["app.kubernetes.io/component"] != d.component {
					t.Errorf("%s: %s replicas %d selector %v, want %d and component %s", layout.name, d.name, *dep.Spec.Replicas, dep.Spec.Selector.MatchLabels, layout.replicas, d.component)
				}
				wantInit := []string{"config-render", "wait-db"}
				if d.name == "heat-server" {
					wantInit = append(wantInit, "heat-check") // started on demand: its configuration is proven first
				}
				if names := hhNames(pod.InitContainers); !reflect.DeepEqual(names, wantInit) {
					t.Errorf("%s: %s init containers = %v, want %v", layout.name, d.name, names, wantInit)
				} else {
					checkWaitDBStep(t, pod.InitContainers[1], []string{"/etc/heat/heat.conf", "database", "migrate:heat/db/sqlalchemy/migrate_repo", "heat-init", "1800"})
				}
				c := containerByName(pod.Containers, d.name)
				if c == nil || len(pod.Containers) != 1 {
					t.Fatalf("%s: %s containers = %v, want only %s", layout.name, d.name, hhNames(pod.Containers), d.name)
				}
				command := append([]string(nil), c.Command...)
				if len(command) > 2 && command[1] == "-c" {
					for _, want := range []string{"import heat.cmd.all as heat_all", "heat_all.launch_all()", "launcher.wait()", "os._exit(0)"} {
						if !strings.Contains(command[2], want) {
							t.Errorf("%s: %s program lacks %q", layout.name, d.name, want)
						}
					}
					command[2] = ""
				}
				if !reflect.DeepEqual(command, d.command) {
					t.Errorf("%s: %s command = %.300q, want %q", layout.name, d.name, c.Command, d.command)
				}
				if m := hhMount(c, "/etc/heat/heat.conf"); m == nil || m.Name != "config" || m.SubPath != "heat.conf" || !m.ReadOnly {
					t.Errorf("%s: %s mounts %v, want the rendered heat.conf at /etc/heat/heat.conf", layout.name, d.name, c.VolumeMounts)
				}
				if c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Memory().IsZero() {
					t.Errorf("%s: %s resources = %v, want memory requests and limits", layout.name, d.name, c.Resources)
				}
				if dep.Spec.Template.Annotations["checksum/config"] != job.Spec.Template.Annotations["checksum/config"] || dep.Spec.Template.Annotations["checksum/config"] == "" {
					t.Errorf("%s: %s config checksum %q differs from the Job's", layout.name, d.name, dep.Spec.Template.Annotations["checksum/config"])
				}
				if len(d.ports) == 0 {
					if len(c.Ports) != 0 || c.LivenessProbe != nil || c.ReadinessProbe == nil || c.ReadinessProbe.Exec == nil || c.StartupProbe == nil {
						t.Errorf("%s: %s ports %v probes %+v %+v %+v, want no port, exec startup/readiness, no liveness", layout.name, d.name, c.Ports, c.StartupProbe, c.ReadinessProbe, c.LivenessProbe)
					}
					continue
				}
				var ports []int32
				for _, p := range c.Ports {
					ports = append(ports, p.ContainerPort)
					byPort[p.ContainerPort] = dep
				}
				if !reflect.DeepEqual(ports, d.ports) {
					t.Errorf("%s: %s ports = %v, want %v", layout.name, d.name, ports, d.ports)
				}
				hhCheckProbes(t, c, "/", int(d.ports[0]))
			}
			for _, s := range heatServices {
				if dep := byPort[s.port]; dep == nil {
					t.Errorf("%s: no Deployment serves port %d of Service %s", layout.name, s.port, s.name)
				} else {
					hhCheckNodePort(t, layout.objs.services[s.name], s.port, s.nodePort, dep.Spec.Selector.MatchLabels)
				}
			}
		}
	})

	t.Run("job", func(t *testing.T) {
		pod := job.Spec.Template.Spec
		if !strings.HasPrefix(job.Name, "heat-init-") || pod.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("Job %s restartPolicy %s, want heat-init-<hash>, Never", job.Name, pod.RestartPolicy)
		}
		hhCheckUser(t, "heat-init", pod, 904)
		all := podContainers(pod)
		if names := hhNames(all); !reflect.DeepEqual(names, heatSteps) || len(pod.Containers) != 1 {
			t.Fatalf("heat-init steps = %v (last is the main container), want %v", names, heatSteps)
		}
		for _, c := range all {
			if c.Command[0] == "/bin/sh" {
				hhScript(t, &c)
			}
		}
		db := containerByName(all, "db-create")
		if hhEnv(t, db, "DB_NAME") != "heat" || hhEnv(t, db, "DB_USER") != "heat" || hhSecretRef(db, "DB_PASSWORD") != "heat-db/password" {
			t.Errorf("db-create env = %v, want database and user heat with heat-db's password", db.Env)
		}
		sync := containerByName(all, "db-sync")
		if want := []string{"heat-manage", "--config-file", "/etc/heat/heat.conf", "db_sync"}; !reflect.DeepEqual(sync.Command, want) {
			t.Errorf("db-sync command = %v, want %v", sync.Command, want)
		}
		if m := hhMount(sync, "/etc/heat/heat.conf"); m == nil || m.SubPath != "heat.conf" {
			t.Errorf("db-sync mounts %v, want heat.conf at /etc/heat/heat.conf", sync.VolumeMounts)
		}
		for _, tt := range []struct {
			step, user, password, name, typ string
			endpoints                       map[string]string
		}{
			{step: "keystone-register", user: "heat", password: "heat-keystone/password", name: "heat", typ: "orchestration", endpoints: map[string]string{
				"PUBLIC": "http://127.0.0.1:30004/v1/%(tenant_id)s", "INTERNAL": "http://heat-api.openstack.svc:8004/v1/%(tenant_id)s", "ADMIN": "http://heat-api.openstack.svc:8004/v1/%(tenant_id)s"}},
			{step: "keystone-register-cfn", name: "heat-cfn", typ: "cloudformation", endpoints: map[string]string{
				"PUBLIC": "http://127.0.0.1:30000/v1", "INTERNAL": "http://heat-api-cfn.openstack.svc:8000/v1", "ADMIN": "http://heat-api-cfn.openstack.svc:8000/v1"}},
		} {
			c := containerByName(all, tt.step)
			if user := envByName(c, "SVC_USER"); (user == nil) != (tt.user == "") || (user != nil && user.Value != tt.user) || hhSecretRef(c, "SVC_PASSWORD") != tt.password || hhEnv(t, c, "SVC_NAME") != tt.name || hhEnv(t, c, "SVC_TYPE") != tt.typ {
				t.Errorf("%s env = %v, want user %q (password %q), service %s type %s", tt.step, c.Env, tt.user, tt.password, tt.name, tt.typ)
			}
			for iface, url := range tt.endpoints {
				if got := hhEnv(t, c, "ENDPOINT_"+iface); got != url {
					t.Errorf("%s ENDPOINT_%s = %q, want %q", tt.step, iface, got, url)
				}
			}
			if hhEnv(t, c, "OS_AUTH_URL") != "http://keystone-api.openstack.svc:5000/v3" || hhSecretRef(c, "OS_PASSWORD") != "keystone-admin/password" {
				t.Errorf("%s talks to %s as %s, want keystone-api.openstack.svc with keystone-admin", tt.step, hhEnv(t, c, "OS_AUTH_URL"), hhSecretRef(c, "OS_PASSWORD"))
			}
		}
		sd := containerByName(all, "stack-domain")
		if hhEnv(t, sd, "STACK_DOMAIN") != "heat" || hhEnv(t, sd, "DOMAIN_ADMIN") != "heat_domain_admin" || hhSecretRef(sd, "DOMAIN_ADMIN_PASSWORD") != "heat-domain/password" ||
			hhEnv(t, sd, "OWNER_ROLE") != "heat_stack_owner" || hhEnv(t, sd, "USER_ROLE") != "heat_stack_user" {
			t.Errorf("stack-domain env = %v, want domain heat, heat_domain_admin with heat-domain's password, roles heat_stack_owner and heat_stack_user", sd.Env)
		}
		if n := len(sd.Command); n != 4 || sd.Command[0] != "python3" || sd.Command[n-1] != "stack-domain" || !strings.Contains(sd.Command[2], "def stack_domain") {
			t.Errorf("stack-domain runs %q, want the keystone program in mode stack-domain", sd.Command)
		}
	})
}

// TestHeatOverrides checks what the daemon sets per host (public endpoints with the node
// address: Keystone endpoints and heat.conf's instance-facing URLs follow), an explicit
// conf override, ClusterIP Services, a new Job for a new config and the HA replicas.
func TestHeatOverrides(t *testing.T) {
	base, _, _ := hhRender(t, "heat", deploy.DeploymentSpec{Images: testImages})
	objs, _, _ := hhRender(t, "heat", hhOverrides("heat", map[string]any{
		"endpoints": map[string]any{"heat": map[string]any{"public": "http://192.0.2.10:30004"}, "cfn": map[string]any{"public": "http://192.0.2.10:30000/"}},
		"service":   map[string]any{"type": "ClusterIP"},
	}))
	all := podContainers(objs.jobs[0].Spec.Template.Spec)
	if got := hhEnv(t, containerByName(all, "keystone-register"), "ENDPOINT_PUBLIC"); got != "http://192.0.2.10:30004/v1/%(tenant_id)s" {
		t.Errorf("heat public endpoint = %q, want http://192.0.2.10:30004/v1/%%(tenant_id)s", got)
	}
	ini := hhParseINI(t, objs.secrets["heat-config"].StringData["heat.conf"])
	if got := ini["DEFAULT"]["heat_metadata_server_url"]; got != "http://192.0.2.10:30000" {
		t.Errorf("heat_metadata_server_url = %q, want http://192.0.2.10:30000", got)
	}
	if got := ini["DEFAULT"]["heat_waitcondition_server_url"]; got != "http://192.0.2.10:30000/v1/waitcondition" {
		t.Errorf("heat_waitcondition_server_url = %q, want http://192.0.2.10:30000/v1/waitcondition", got)
	}
	for name, s := range objs.services {
		if s.Spec.Type != corev1.ServiceTypeClusterIP || s.Spec.Ports[0].NodePort != 0 {
			t.Errorf("Service %s with service.type ClusterIP = %s nodePort %d", name, s.Spec.Type, s.Spec.Ports[0].NodePort)
		}
	}
	if objs.jobs[0].Name == base.jobs[0].Name {
		t.Errorf("new endpoints kept Job %s, want a new Job", objs.jobs[0].Name)
	}

	explicit, _, _ := hhRender(t, "heat", hhOverrides("heat", map[string]any{"conf": map[string]any{"heat": map[string]any{"DEFAULT": map[string]any{
		"heat_metadata_server_url": "http://203.0.113.5:8000", "debug": true}}}}))
	ini = hhParseINI(t, explicit.secrets["heat-config"].StringData["heat.conf"])
	if ini["DEFAULT"]["heat_metadata_server_url"] != "http://203.0.113.5:8000" || ini["DEFAULT"]["debug"] != "true" {
		t.Errorf("conf override: heat_metadata_server_url %q debug %q, want http://203.0.113.5:8000 and true", ini["DEFAULT"]["heat_metadata_server_url"], ini["DEFAULT"]["debug"])
	}
	for name, d := range explicit.deployments {
		if d.Spec.Template.Annotations["checksum/config"] == base.deployments[name].Spec.Template.Annotations["checksum/config"] {
			t.Errorf("%s kept its config checksum after a config change", name)
		}
	}
	again, _, _ := hhRender(t, "heat", deploy.DeploymentSpec{Images: testImages})
	if again.jobs[0].Name != base.jobs[0].Name {
		t.Errorf("same values gave Jobs %s and %s, want one name", base.jobs[0].Name, again.jobs[0].Name)
	}
	ha, _, _ := hhRender(t, "heat", deploy.DeploymentSpec{Images: testImages, Profile: deploy.ProfileHA})
	for name, d := range ha.deployments {
		if *d.Spec.Replicas != 3 {
			t.Errorf("HA profile %s replicas = %d, want 3", name, *d.Spec.Replicas)
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if slices.Contains(c.Command, "--on-demand") {
				t.Errorf("HA profile %s command %q has --on-demand, want Heat started with the pod", name, c.Command)
			}
		}
	}
	// onDemand false: heat-server starts Heat with the pod.
	eager, _, _ := hhRender(t, "heat", hhOverrides("heat", map[string]any{"onDemand": false}))
	c := containerByName(eager.deployments["heat-server"].Spec.Template.Spec.Containers, "heat-server")
	if got := c.Command[3:]; !reflect.DeepEqual(got, []string{"--config-file", "/etc/heat/heat.conf"}) {
		t.Errorf("onDemand false: heat-server arguments %q, want only --config-file /etc/heat/heat.conf", got)
	}
}

// horizonFile reads one rendered file of the horizon-config Secret.
func horizonFile(t *testing.T, objs hhObjects, name string) string {
	t.Helper()
	s := objs.secrets["horizon-config"]
	if s == nil {
		t.Fatalf("horizon renders no horizon-config Secret: %v", objs.secrets)
	}
	data, ok := s.StringData[name]
	if !ok {
		t.Fatalf("horizon-config has no %s: %v", name, s.StringData)
	}
	return data
}

// jsonRoundTrip gives a value the shape encoding/json decodes it to (numbers float64).
func jsonRoundTrip(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestHorizonChart(t *testing.T) {
	objs, _, vals := hhRender(t, "horizon", deploy.DeploymentSpec{Images: testImages})
	if len(objs.deployments) != 1 || len(objs.services) != 1 || len(objs.jobs) != 0 || len(objs.secrets) != 1 {
		t.Fatalf("horizon renders %d Deployments, %d Services, %d Jobs, %d Secrets; want 1, 1, 0, 1", len(objs.deployments), len(objs.services), len(objs.jobs), len(objs.secrets))
	}
	dep := objs.deployments["horizon"]
	if dep == nil {
		t.Fatalf("no Deployment horizon: %v", objs.deployments)
	}
	pod := dep.Spec.Template.Spec

	t.Run("local_settings.py", func(t *testing.T) {
		got := hhPythonSettings(t, horizonFile(t, objs, "local_settings.py"))
		want := jsonRoundTrip(t, vals["settings"]).(map[string]any)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("local_settings.py evaluates to\n%v\nwant values.settings\n%v", got, want)
		}
		for key, v := range map[string]any{
			"OPENSTACK_KEYSTONE_URL":            "http://keystone-api.openstack.svc:5000/v3",
			"OPENSTACK_ENDPOINT_TYPE":           "internalURL",
			"ALLOWED_HOSTS":                     []any{"*"},
			"SECRET_KEY":                        "@@HORIZON_SECRET_KEY@@",
			"SESSION_ENGINE":                    "django.contrib.sessions.backends.cache",
			"OPENSTACK_KEYSTONE_DEFAULT_DOMAIN": "Default",
			"TIME_ZONE":                         "UTC",
			"WEBROOT":                           "/horizon/",
			"COMPRESS_OFFLINE":                  true,
			"STATIC_ROOT":                       "/var/lib/openstack-dashboard/static/",
			"DEBUG":                             false,
			"CACHES":                            map[string]any{"default": map[string]any{"BACKEND": "django.core.cache.backends.memcached.PyMemcacheCache", "LOCATION": "memcached.openstack.svc:11211"}},
		} {
			if !reflect.DeepEqual(got[key], v) {
				t.Errorf("local_settings.py %s = %#v, want %#v", key, got[key], v)
			}
		}
	})

	t.Run("apache", func(t *testing.T) {
		site := horizonFile(t, objs, "openstack-dashboard.conf")
		for _, want := range []string{
			"WSGIDaemonProcess horizon processes=1 threads=8 ",
			"WSGIProcessGroup horizon\n",
			"WSGIScriptAlias /horizon /usr/share/openstack-dashboard/wsgi.py\n",
			" inactivity-timeout=600\n",
			"Alias /horizon/static /var/lib/openstack-dashboard/static\n",
			"RedirectMatch ^/$ /horizon/\n",
			"WSGISocketPrefix /run/apache2/wsgi\n",
			"ErrorLog /dev/stderr\n",
		} {
			if !strings.Contains(site, want) {
				t.Errorf("apache site lacks %q:\n%s", want, site)
			}
		}
		if strings.Contains(site, "WSGIImportScript") {
			t.Errorf("apache site preloads Django (WSGIImportScript), which inactivity-timeout would load again at once:\n%s", site)
		}
		if ports := horizonFile(t, objs, "ports.conf"); !strings.HasSuffix(ports, "\nListen 8080\n") || strings.Count(ports, "Listen") != 1 {
			t.Errorf("ports.conf = %q, want only Listen 8080", ports)
		}
	})

	t.Run("deployment", func(t *testing.T) {
		hhCheckUser(t, "horizon", pod, 905)
		if names := hhNames(pod.InitContainers); !reflect.DeepEqual(names, []string{"config-render", "dashboard-check"}) {
			t.Errorf("init containers = %v, want [config-render dashboard-check]", names)
		}
		if check := containerByName(pod.InitContainers, "dashboard-check"); check != nil {
			program, err := fs.ReadFile(heatHorizonFS(t), "horizon/files/dashboard_check.py")
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{"/usr/bin/python3", "-W", "ignore", "-c", string(program), "/horizon"}; !reflect.DeepEqual(check.Command, want) {
				t.Errorf("dashboard-check command = %.200q, want files/dashboard_check.py with the web root /horizon", check.Command)
			}
			for _, path := range []string{"/etc/openstack-dashboard/local_settings.py", "/etc/openstack-dashboard/local_settings.d"} {
				if hhMount(check, path) == nil {
					t.Errorf("dashboard-check does not mount %s as the dashboard does", path)
				}
			}
		}
		c := containerByName(pod.Containers, "horizon")
		if c == nil || len(pod.Containers) != 1 {
			t.Fatalf("containers = %v, want only horizon", hhNames(pod.Containers))
		}
		script := hhScript(t, c)
		if !strings.Contains(script, ". /etc/apache2/envvars\n") || !strings.HasSuffix(strings.TrimSpace(script), "exec /usr/sbin/apache2 -DFOREGROUND") {
			t.Errorf("horizon script = %q, want Debian's envvars then exec apache2 -DFOREGROUND", script)
		}
		if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 8080 {
			t.Errorf("horizon ports = %v, want 8080", c.Ports)
		}
		hhCheckProbes(t, c, "/horizon/static/dashboard/img/favicon.ico", 8080)
		for path, file := range map[string]string{
			"/etc/openstack-dashboard/local_settings.py":          "local_settings.py",
			"/etc/apache2/sites-enabled/openstack-dashboard.conf": "openstack-dashboard.conf",
			"/etc/apache2/ports.conf":                             "ports.conf",
		} {
			if m := hhMount(c, path); m == nil || m.Name != "config" || m.SubPath != file || !m.ReadOnly {
				t.Errorf("horizon mount at %s = %+v, want config %s read-only", path, m, file)
			}
		}
		for path, volume := range map[string]string{
			"/etc/openstack-dashboard/local_settings.d": "local-settings-d",
			"/etc/apache2/sites-enabled":                "sites-enabled",
			"/run/apache2":                              "apache-run",
		} {
			m := hhMount(c, path)
			if m == nil || m.Name != volume || m.SubPath != "" {
				t.Errorf("horizon mount at %s = %+v, want volume %s", path, m, volume)
				continue
			}
			if v := hhVolume(pod, volume); v == nil || v.EmptyDir == nil {
				t.Errorf("volume %s = %+v, want an emptyDir", volume, v)
			}
		}
		if m := hhMount(c, "/etc/apache2/sites-enabled"); m != nil && m.ReadOnly {
			t.Errorf("sites-enabled is read-only: the runtime cannot make the site file's mount point")
		}
		if c.Resources.Limits.Memory().IsZero() {
			t.Errorf("horizon has no memory limit")
		}
		if dep.Spec.Template.Annotations["checksum/config"] == "" {
			t.Errorf("horizon pod has no checksum/config annotation")
		}
		hhCheckNodePort(t, objs.services["horizon"], 8080, 30080, dep.Spec.Selector.MatchLabels)
	})
}

// TestHorizonPythonLiterals renders awkward values into local_settings.py and checks that
// Python reads back exactly the values.
func TestHorizonPythonLiterals(t *testing.T) {
	tests := []struct {
		name  string
		value any
	}{
		{name: "quotes", value: `it's "quoted" '''x''' """y"""`},
		{name: "backslashes", value: `C:\new\table \\ \u0041 \x41`},
		{name: "control", value: "line1\nline2\ttab\r\x00\x1b"},
		{name: "unicode", value: "héllo ☃ 𝄞 \u2028"},
		{name: "html", value: "<script>&amp;</script>"},
		{name: "percent and braces", value: "%(tenant_id)s {x} ${HOME} $(id) `id`"},
		{name: "python keywords", value: "True False None __import__('os')"},
		{name: "empty", value: ""},
		{name: "bool", value: true},
		{name: "integer", value: 42},
		{name: "negative", value: -7},
		{name: "float", value: 0.25},
		{name: "big integer", value: 1e15},
		{name: "list", value: []any{"a", 1, false, nil, []any{}, map[string]any{}}},
		{name: "nested map", value: map[string]any{"a'b": map[string]any{"c\"d": []any{"e\\f", nil}}, "x": 1.5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, _, _ := hhRender(t, "horizon", hhOverrides("horizon", map[string]any{"settings": map[string]any{"OSD_TEST_VALUE": tt.value}}))
			got := hhPythonSettings(t, horizonFile(t, objs, "local_settings.py"))
			if want := jsonRoundTrip(t, tt.value); !reflect.DeepEqual(got["OSD_TEST_VALUE"], want) {
				t.Errorf("OSD_TEST_VALUE = %#v, want %#v", got["OSD_TEST_VALUE"], want)
			}
		})
	}
}

// TestHorizonOverrides checks values the daemon or an operator may set: another web root
// (apache aliases and probes follow), another port, a removed setting, and refused names.
func TestHorizonOverrides(t *testing.T) {
	objs, _, _ := hhRender(t, "horizon", hhOverrides("horizon", map[string]any{
		"port":     8081,
		"service":  map[string]any{"nodePort": 30081},
		"settings": map[string]any{"WEBROOT": "/dashboard/", "LOGGING": nil},
	}))
	c := containerByName(objs.deployments["horizon"].Spec.Template.Spec.Containers, "horizon")
	hhCheckProbes(t, c, "/dashboard/static/dashboard/img/favicon.ico", 8081)
	hhCheckNodePort(t, objs.services["horizon"], 8081, 30081, objs.deployments["horizon"].Spec.Selector.MatchLabels)
	site := horizonFile(t, objs, "openstack-dashboard.conf")
	for _, want := range []string{"WSGIScriptAlias /dashboard /usr/share/openstack-dashboard/wsgi.py\n", "Alias /dashboard/static ", "RedirectMatch ^/$ /dashboard/\n"} {
		if !strings.Contains(site, want) {
			t.Errorf("apache site with WEBROOT /dashboard/ lacks %q:\n%s", want, site)
		}
	}
	if ports := horizonFile(t, objs, "ports.conf"); !strings.Contains(ports, "Listen 8081\n") {
		t.Errorf("ports.conf = %q, want Listen 8081", ports)
	}
	settings := hhPythonSettings(t, horizonFile(t, objs, "local_settings.py"))
	if _, ok := settings["LOGGING"]; ok || settings["WEBROOT"] != "/dashboard/" {
		t.Errorf("settings LOGGING present %v WEBROOT %v, want LOGGING removed and /dashboard/", ok, settings["WEBROOT"])
	}

	root, _, _ := hhRender(t, "horizon", hhOverrides("horizon", map[string]any{"settings": map[string]any{"WEBROOT": "/"}}))
	site = horizonFile(t, root, "openstack-dashboard.conf")
	if !strings.Contains(site, "WSGIScriptAlias / /usr/share/openstack-dashboard/wsgi.py\n") || strings.Contains(site, "RedirectMatch") {
		t.Errorf("apache site with WEBROOT / =\n%s\nwant the dashboard at / and no redirect", site)
	}
	hhCheckProbes(t, containerByName(root.deployments["horizon"].Spec.Template.Spec.Containers, "horizon"), "/static/dashboard/img/favicon.ico", 8080)

	// Django kept loaded (inactivityTimeout 0): preloaded, probed on the login page, no check.
	kept, _, _ := hhRender(t, "horizon", hhOverrides("horizon", map[string]any{"apache": map[string]any{"inactivityTimeout": 0}}))
	site = horizonFile(t, kept, "openstack-dashboard.conf")
	if !strings.Contains(site, "WSGIImportScript /usr/share/openstack-dashboard/wsgi.py process-group=horizon application-group=%{GLOBAL}\n") || strings.Contains(site, "inactivity-timeout") {
		t.Errorf("apache site with inactivityTimeout 0 =\n%s\nwant Django preloaded and no inactivity-timeout", site)
	}
	kpod := kept.deployments["horizon"].Spec.Template.Spec
	kc := containerByName(kpod.Containers, "horizon")
	hhCheckProbes(t, kc, "/horizon/auth/login/", 8080)
	if kc.StartupProbe.TimeoutSeconds < 10 {
		t.Errorf("startup probe timeout = %d s, want at least 10 (Django loads in about 5 s)", kc.StartupProbe.TimeoutSeconds)
	}
	if names := hhNames(kpod.InitContainers); !reflect.DeepEqual(names, []string{"config-render"}) {
		t.Errorf("init containers with inactivityTimeout 0 = %v, want [config-render]", names)
	}

	for _, bad := range []any{"abc", -1, 1.5, "10m"} {
		err := hhRenderError(t, "horizon", hhOverrides("horizon", map[string]any{"apache": map[string]any{"inactivityTimeout": bad}}))
		if err == nil || !strings.Contains(err.Error(), "apache.inactivityTimeout") || !strings.Contains(err.Error(), "whole seconds") {
			t.Errorf("apache.inactivityTimeout %v: render error = %v, want it refused as not whole seconds", bad, err)
		}
	}

	for _, key := range []string{"lower_case", "1ABC", "A-B", "A B"} {
		if err := hhRenderError(t, "horizon", hhOverrides("horizon", map[string]any{"settings": map[string]any{key: "x"}})); err == nil || !strings.Contains(err.Error(), "upper-case Python name") {
			t.Errorf("setting %q: render error = %v, want it refused as not an upper-case Python name", key, err)
		}
	}
}

// TestHeatHorizonSecrets checks that secrets reach the pods only by reference to Secrets
// deploy.DefaultSecrets generates, that values carry placeholders only, and runs every
// pod's config-render step for real: no placeholder is left, no value is in the manifests.
func TestHeatHorizonSecrets(t *testing.T) {
	generated := hhGenerated()
	if f := generated["heat-domain/auth-encryption-key"]; f != deploy.FormatKey32 {
		t.Errorf("heat-domain/auth-encryption-key format = %q, want %q (Heat needs exactly 32 characters)", f, deploy.FormatKey32)
	}
	for _, chart := range []string{"heat", "horizon"} {
		t.Run(chart, func(t *testing.T) {
			objs, out, vals := hhRender(t, chart, deploy.DeploymentSpec{Images: testImages})
			pods := map[string]corev1.PodSpec{}
			for name, d := range objs.deployments {
				pods[name] = d.Spec.Template.Spec
			}
			for _, j := range objs.jobs {
				pods[j.Name] = j.Spec.Template.Spec
			}
			checkPlaceholders(t, vals, regexp.MustCompile(`(?i)password|secret|_key$`))
			files := objs.secrets[chart+"-config"].StringData
			if len(objs.secrets) != 1 || len(files) == 0 {
				t.Fatalf("secrets = %v, want only %s-config", objs.secrets, chart)
			}
			for name, pod := range pods {
				hhCheckSecretRefs(t, name, pod)
				_, values := hhConfigRender(t, name, pod, files, hhSecrets{})
				for env, v := range values {
					if strings.Contains(out, v) {
						t.Errorf("manifests contain the value of %s", env)
					}
				}
			}
		})
	}
}

// TestHeatHorizonInOpenstackImage checks, in the control-plane image osd builds (the
// image cache, built first when it lacks it: see catalogImage), every program and file
// the heat and horizon charts rely on.
func TestHeatHorizonInOpenstackImage(t *testing.T) {
	if testing.Short() {
		t.Skip("reads the 500 MB image layer and may build the image; skipped in -short")
	}
	tree := readImageTree(t, catalogImage(t, "openstack"), "etc/passwd")
	entries := map[string]string{} // path -> "" or symlink target
	for p, h := range tree.headers {
		entries[p] = h.Linkname
	}
	passwd := string(tree.content["etc/passwd"])
	for _, p := range []string{
		// heat: the Deployments' and the Job's programs, the paste file heat.conf names.
		"usr/bin/heat-api", "usr/bin/heat-api-cfn", "usr/bin/heat-engine", "usr/bin/heat-manage", "etc/heat/api-paste.ini",
		// the init Job's clients
		"usr/bin/openstack", "usr/bin/mysql", "usr/bin/mysqladmin",
		// horizon: apache with Debian's envvars and mod_wsgi, the dashboard's WSGI script and manage.py
		"usr/sbin/apache2", "etc/apache2/envvars", "etc/apache2/apache2.conf", "usr/lib/apache2/modules/mod_wsgi.so",
		"etc/apache2/mods-enabled/wsgi.load", "etc/apache2/mods-enabled/alias.load",
		"usr/share/openstack-dashboard/wsgi.py", "usr/share/openstack-dashboard/manage.py",
		// offline compression done by openstack-dashboard's postinst (COMPRESS_OFFLINE = True)
		"var/lib/openstack-dashboard/static/dashboard/manifest.json",
		// CACHES' PyMemcacheCache backend
		"usr/lib/python3/dist-packages/pymemcache/__init__.py",
	} {
		if _, ok := entries[p]; !ok {
			t.Errorf("openstack image lacks /%s", p)
		}
	}
	// Django reads local_settings.py through this link: the chart mounts the file at its target.
	if got := entries["usr/lib/python3/dist-packages/openstack_dashboard/local/local_settings.py"]; got != "/etc/openstack-dashboard/local_settings.py" {
		t.Errorf("openstack_dashboard/local/local_settings.py -> %q, want /etc/openstack-dashboard/local_settings.py", got)
	}
	if got := entries["usr/lib/python3/dist-packages/openstack_dashboard/local/local_settings.d"]; got != "/etc/openstack-dashboard/local_settings.d" {
		t.Errorf("openstack_dashboard/local/local_settings.d -> %q, want /etc/openstack-dashboard/local_settings.d", got)
	}
	for _, want := range []string{"\nheat:x:904:904:", "\nhorizon:x:905:905:"} {
		if !strings.Contains("\n"+passwd, want) {
			t.Errorf("openstack image /etc/passwd lacks %q", strings.TrimPrefix(want, "\n"))
		}
	}
}

// hhSecrets holds made-up values of the generated Secrets ("name/key" -> value), each in
// the format deploy.DefaultSecrets generates (hex, 32 hex characters for Heat's
// auth-encryption-key, Fernet keys), made on first use and the same for every reference.
type hhSecrets map[string]string

func (s hhSecrets) value(t *testing.T, ref string) string {
	t.Helper()
	if v, ok := s[ref]; ok {
		return v
	}
	n, format := 32, hhGenerated()[ref]
	if format == deploy.FormatKey32 {
		n = 16
	}
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	switch format {
	case deploy.FormatHex, deploy.FormatKey32:
		s[ref] = hex.EncodeToString(b)
	case deploy.FormatFernet:
		s[ref] = base64.URLEncoding.EncodeToString(b)
	default:
		t.Fatalf("Secret %s is not generated by deploy.DefaultSecrets", ref)
	}
	return s[ref]
}

// env returns a container's environment as NAME=VALUE, Secret references resolved.
func (s hhSecrets) env(t *testing.T, c *corev1.Container) []string {
	t.Helper()
	var out []string
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil {
			if e.ValueFrom.SecretKeyRef == nil {
				t.Fatalf("%s env %s: only Secret references are simulated", c.Name, e.Name)
			}
			v = s.value(t, e.ValueFrom.SecretKeyRef.Name+"/"+e.ValueFrom.SecretKeyRef.Key)
		}
		out = append(out, e.Name+"="+v)
	}
	return out
}

// hhRunConfigRender runs a config-render step's script with /bin/sh over files (the config
// Secret), its Secret-backed variables taken from secrets. It returns the directory of
// the rendered files and the values it used by variable.
func hhRunConfigRender(t *testing.T, render *corev1.Container, files map[string]string, secrets hhSecrets) (string, map[string]string) {
	t.Helper()
	values := map[string]string{}
	for _, kv := range secrets.env(t, render) {
		k, v, _ := strings.Cut(kv, "=")
		values[k] = v
	}
	return runRenderScript(t, render, files, values), values
}

// shq quotes s for the shell.
func shq(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func shArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shq(a)
	}
	return strings.Join(q, " ")
}

// podFiles writes the shell lines that give container c of pod its volumes in the rootfs
// $R as the kubelet would: config files (rendered by config-render, in dir) at their
// mount paths and Secret volumes (values from secrets, files written under work),
// readable by the pod's fsGroup; emptyDirs as tmpfs owned by the fsGroup. Parents are
// mounted before what is mounted inside them, as the runtime does.
func podFiles(t *testing.T, pod corev1.PodSpec, c *corev1.Container, dir, work string, done map[string]bool, secrets hhSecrets) string {
	t.Helper()
	gid := *pod.SecurityContext.FSGroup
	var b strings.Builder
	mounts := slices.Clone(c.VolumeMounts)
	slices.SortStableFunc(mounts, func(x, y corev1.VolumeMount) int {
		return strings.Count(x.MountPath, "/") - strings.Count(y.MountPath, "/")
	})
	for _, m := range mounts {
		if done[m.MountPath] {
			continue
		}
		done[m.MountPath] = true
		v := hhVolume(pod, m.Name)
		switch {
		case v == nil:
			t.Fatalf("%s mounts unknown volume %s", c.Name, m.Name)
		case m.Name == "config" && m.SubPath != "":
			fmt.Fprintf(&b, "mkdir -p \"$R\"%s\ncp %s \"$R\"%s\nchgrp %d \"$R\"%s\nchmod 0440 \"$R\"%s\n",
				shq(filepath.Dir(m.MountPath)), shq(filepath.Join(dir, m.SubPath)), shq(m.MountPath), gid, shq(m.MountPath), shq(m.MountPath))
		case v.Secret != nil && m.SubPath == "":
			files := map[string]string{}
			for ref := range hhGenerated() {
				if name, key, _ := strings.Cut(ref, "/"); name == v.Secret.SecretName {
					files[key] = secrets.value(t, ref)
				}
			}
			if len(files) == 0 {
				t.Fatalf("%s mounts Secret %s, which deploy.DefaultSecrets does not make", c.Name, v.Secret.SecretName)
			}
			src := writeFiles(t, work, "secret-"+v.Secret.SecretName, files)
			fmt.Fprintf(&b, "mkdir -p \"$R\"%s\ncp %s/* \"$R\"%s/\nchgrp -R %d \"$R\"%s\nchmod 0440 \"$R\"%s/*\n",
				shq(m.MountPath), shq(src), shq(m.MountPath), gid, shq(m.MountPath), shq(m.MountPath))
		case v.EmptyDir != nil:
			fmt.Fprintf(&b, "mkdir -p \"$R\"%s\nmount -t tmpfs -o mode=2770,gid=%d tmpfs \"$R\"%s\n", shq(m.MountPath), gid, shq(m.MountPath))
		default:
			t.Fatalf("%s mounts %s (%+v): not simulated", c.Name, m.Name, v.VolumeSource)
		}
	}
	return b.String()
}

// podCommand is container c's command as shell words, run by env with c's environment.
// What the third run of TestHeatHorizonRunInOpenstackImage's registration steps changes.
const (
	movedCfnEndpoint    = "http://192.0.2.10:30000/v1"
	rotatedHeatPassword = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

func podCommand(t *testing.T, c *corev1.Container, secrets hhSecrets) string {
	t.Helper()
	return shArgs(append(secrets.env(t, c), c.Command...))
}

// runScript is the start of the script TestHeatHorizonRunInOpenstackImage runs inside
// `unshare -n -m -p -f --mount-proc`: every mount and process is private and goes away
// with the namespaces; the rootfs is not written (an overlay in the scratch directory
// takes the changes). Services run as their pods' users; their stdout/stderr is a pipe
// the service user made, as the container runtime hands it a pipe it owns (so apache can
// reopen /dev/stderr).
const runScriptHead = `set -eu
LOWER=$1 S=$2 MEMCACHED_BIN=$3
R=$S/merged
mkdir -p $S/upper $S/work $R
mount -t overlay overlay -o lowerdir=$LOWER,upperdir=$S/upper,workdir=$S/work $R
ip link set lo up
mount -t proc proc $R/proc
mount --bind /dev $R/dev
mount -t tmpfs tmpfs $R/run
mount -t tmpfs -o mode=1777 tmpfs $R/tmp
echo "127.0.0.1 memcached memcached.openstack.svc keystone-api keystone-api.openstack.svc rabbitmq rabbitmq.openstack.svc mariadb mariadb.openstack.svc" >> $R/etc/hosts
install -m 0755 $MEMCACHED_BIN $R/usr/bin/memcached
now() { date +%s.%N; }
since() { awk "BEGIN{printf \"%.1f\", $(now) - $1}"; }
result() { echo "RESULT $*"; }
# as UID LOG ARGV...: run ARGV in the rootfs as UID (gid UID), output to LOG.
as() {
  local uid=$1 log=$2; shift 2
  chroot --userspec=$uid:$uid $R env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 HOME=/tmp "$@" > $log 2>&1
}
# serve UID LOG ARGV...: as, in the background, stdout and stderr a pipe UID owns.
serve() {
  local uid=$1 log=$2; shift 2
  chroot --userspec=$uid:$uid $R env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 HOME=/tmp \
    /bin/sh -c '"$@" 2>&1 | cat' sh "$@" > $log 2>&1 &
}
# wait_http URL SECONDS: HTTP status of URL once it answers (000 if it never does).
wait_http() {
  local code=000 i=0
  while [ $i -lt $(($2 * 5)) ]; do
    code=$(curl -m 10 -s -o /dev/null -w '%{http_code}' "$1" || true)
    [ "$code" != 000 ] && break
    i=$((i+1)); sleep 0.2
  done
  echo $code
}
rss() { ps -u $1 -o rss= | awk '{s+=$1} END {print s+0}'; }
serve 65534 $S/memcached.log /usr/bin/memcached -l 127.0.0.1 -p 11211 -m 32
`

// writeFiles writes files into a new directory under dir and returns it.
func writeFiles(t *testing.T, dir, name string, files map[string]string) string {
	t.Helper()
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for f, data := range files {
		if err := os.WriteFile(filepath.Join(d, f), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// TestHeatHorizonRunInOpenstackImage runs what the heat and horizon charts render in the
// control-plane image osd built (its layer from the image cache, unpacked into a
// directory, or OSD_CHARTS_OPENSTACK_ROOTFS), each process as its pod's user with its
// pod's volumes (config-render run for real, emptyDirs, Secrets with made-up values):
//   - horizon's container command (Debian's apache2 + mod_wsgi as uid 905, memcached from
//     osd's memcached image) until its probe path answers 200; / redirects to the web
//     root; the offline-compressed CSS the login page links is served;
//   - Keystone from the keystone chart (db-sync, bootstrap, uwsgi), then heat's init Job
//     steps keystone-register, keystone-register-cfn and stack-domain, twice (idempotent):
//     endpoints, stack domain, its admin's domain-scoped token and the roles are checked;
//   - heat's Job db-sync, then heat-server (heat-api, heat-api-cfn and heat-engine in one
//     process) until GET / of both APIs answers the version document; heat-api refuses a
//     request without a token (401) and lets an admin token through its
//     keystone_authtoken (the heat user and password the Job registered); the engine
//     started (auth_encryption_key accepted) in the same single process; the HA layout's
//     heat-engine readiness probe against the namespace's real /proc/net/tcp (fails
//     without a connection to port 5672, passes with one).
//
// The only overrides: SQLite instead of MariaDB (no MariaDB in this image; Keystone then
// with one uwsgi process and thread) and a short rpc_response_timeout (no RabbitMQ). Needs root, unshare, chroot, curl, tar; 2-4 minutes.
func TestHeatHorizonRunInOpenstackImage(t *testing.T) {
	switch {
	case testing.Short():
		t.Skip("starts keystone, apache and heat from the openstack image; skipped in -short")
	case os.Geteuid() != 0:
		t.Skip("needs root for namespaces, chroot and mounts")
	}
	for _, tool := range []string{"unshare", "chroot", "curl", "tar", "ps", "awk"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (test/deps.sh installs it): %v", tool, err)
		}
	}
	work := t.TempDir()
	// memcached's binary from osd's memcached image, run in the openstack image's rootfs.
	memcached := readImageTree(t, catalogImage(t, "memcached"), "usr/bin/memcached").content["usr/bin/memcached"]
	if len(memcached) == 0 {
		t.Fatal("memcached image has no /usr/bin/memcached")
	}
	memBin := filepath.Join(work, "memcached.bin")
	if err := os.WriteFile(memBin, memcached, 0o755); err != nil {
		t.Fatal(err)
	}
	rootfs := os.Getenv("OSD_CHARTS_OPENSTACK_ROOTFS")
	if rootfs == "" {
		img := catalogImage(t, "openstack")
		rootfs = t.TempDir()
		start := time.Now()
		unpackImage(t, img, rootfs)
		t.Logf("openstack image unpacked in %s", time.Since(start).Round(time.Second))
	}
	secrets := hhSecrets{}
	var script strings.Builder
	script.WriteString(runScriptHead)
	done := map[string]bool{}
	step := func(pod corev1.PodSpec, name string) *corev1.Container {
		c := containerByName(podContainers(pod), name)
		if c == nil {
			t.Fatalf("no step %s", name)
		}
		return c
	}

	// Keystone, as its chart renders it, on SQLite: one uwsgi process and thread, since
	// concurrent writers from several processes fail with "database is locked" (MariaDB in
	// the cluster has no such limit).
	ks, _, _ := hhRender(t, "keystone", hhOverrides("keystone", map[string]any{"conf": map[string]any{
		"keystone": map[string]any{"database": map[string]any{"connection": "sqlite:////var/lib/keystone/keystone.db"}},
		"uwsgi":    map[string]any{"uwsgi": map[string]any{"processes": 1, "threads": 1}}}}))
	kjob := ks.jobs[0].Spec.Template.Spec
	kfiles, _ := hhConfigRender(t, "keystone", kjob, ks.secrets["keystone-config"].StringData, secrets)
	kdir := writeFiles(t, work, "keystone", kfiles)
	kuid := *kjob.SecurityContext.RunAsUser
	kpod := ks.deployments["keystone-api"].Spec.Template.Spec
	kapi := containerByName(kpod.Containers, "keystone")
	for _, name := range []string{"db-sync", "bootstrap"} {
		script.WriteString(podFiles(t, kjob, step(kjob, name), kdir, work, done, secrets))
	}
	script.WriteString(podFiles(t, kpod, kapi, kdir, work, done, secrets))
	kprobe := kapi.ReadinessProbe.HTTPGet
	fmt.Fprintf(&script, `t=$(now)
as %[1]d $S/keystone-db-sync.log %[2]s || { tail -20 $S/keystone-db-sync.log; exit 1; }
as %[1]d $S/keystone-bootstrap.log %[3]s || { tail -20 $S/keystone-bootstrap.log; exit 1; }
result keystone_setup $(since $t)
serve %[1]d $S/keystone.log %[4]s
`, kuid, podCommand(t, step(kjob, "db-sync"), secrets), podCommand(t, step(kjob, "bootstrap"), secrets), podCommand(t, kapi, secrets))

	// Horizon: its Deployment.
	hz, _, _ := hhRender(t, "horizon", deploy.DeploymentSpec{Images: testImages})
	hpod := hz.deployments["horizon"].Spec.Template.Spec
	hzfiles, _ := hhConfigRender(t, "horizon", hpod, hz.secrets["horizon-config"].StringData, secrets)
	hc := containerByName(hpod.Containers, "horizon")
	script.WriteString(podFiles(t, hpod, hc, writeFiles(t, work, "horizon", hzfiles), work, done, secrets))
	probe := hc.ReadinessProbe.HTTPGet
	base := fmt.Sprintf("http://127.0.0.1:%d", probe.Port.IntValue())
	login := shq(base + "/horizon/auth/login/")
	hcheck := containerByName(hpod.InitContainers, "dashboard-check")
	if hcheck == nil {
		t.Fatal("horizon has no dashboard-check init container")
	}
	fmt.Fprintf(&script, `t=$(now)
as %[1]d $S/dashboard-check.log %[2]s; result horizon_check $? $(since $t)
t=$(now)
serve %[1]d $S/horizon.log %[3]s
result horizon_probe $(wait_http %[4]s 90) $(since $t)
sleep 1
result horizon_idle_rss_kib $(rss %[1]d)
t=$(now)
result horizon_login $(wait_http %[5]s 90) $(since $t)
result horizon_root $(curl -m 10 -s -o /dev/null -w '%%{http_code} %%{redirect_url}' %[6]s/)
curl -m 10 -s -o $S/login.html %[5]s
css=$(grep -o 'href="[^"]*/static/dashboard/css/output\.[0-9a-f]*\.css"' $S/login.html | head -n1 | sed 's/^href="//; s/"$//')
result horizon_css ${css:-none} $(curl -m 10 -s -o /dev/null -w '%%{http_code}' %[6]s$css)
for i in 1 2 3 4 5 6 7 8 9 10; do curl -m 10 -s -o /dev/null %[5]s; done
result horizon_rss_kib $(rss %[1]d)
`, *hpod.SecurityContext.RunAsUser, podCommand(t, hcheck, secrets), podCommand(t, hc, secrets), shq(base+probe.Path), login, base)

	// Heat: db-sync, the APIs and the engine.
	ht, _, _ := hhRender(t, "heat", hhOverrides("heat", map[string]any{"conf": map[string]any{"heat": map[string]any{
		"DEFAULT":  map[string]any{"rpc_response_timeout": 5},
		"database": map[string]any{"connection": "sqlite:////var/lib/heat/heat.sqlite"}}}}))
	jpod := ht.jobs[0].Spec.Template.Spec
	htfiles, _ := hhConfigRender(t, "heat", jpod, ht.secrets["heat-config"].StringData, secrets)
	hdir := writeFiles(t, work, "heat", htfiles)
	uid := *jpod.SecurityContext.RunAsUser
	// heat-server's wait-db before the db sync: waiting, then giving up (after 3 s here,
	// 1800 in the chart); after the db sync: passing.
	server := ht.deployments["heat-server"].Spec.Template.Spec
	wait := step(server, "wait-db")
	short := wait.DeepCopy()
	short.Command[len(short.Command)-1] = "3"
	script.WriteString(podFiles(t, server, wait, hdir, work, done, secrets))
	script.WriteString(podFiles(t, jpod, step(jpod, "db-sync"), hdir, work, done, secrets))
	fmt.Fprintf(&script, `if as %[1]d $S/heat-wait-db-before.log %[2]s; then result heat_wait_db_before 0; else result heat_wait_db_before $? $(grep -c 'waiting for the heat-init Job' $S/heat-wait-db-before.log) $(grep -c 'the heat-init Job has not migrated it' $S/heat-wait-db-before.log) $(grep -c Traceback $S/heat-wait-db-before.log); fi
t=$(now)
if as %[1]d $S/heat-db-sync.log %[3]s; then result heat_db_sync 0 $(since $t); else result heat_db_sync $? $(since $t); fi
if as %[1]d $S/heat-wait-db.log %[4]s; then result heat_wait_db_after 0; else result heat_wait_db_after $?; tail -5 $S/heat-wait-db.log; fi
t=$(now)
`, uid, podCommand(t, short, secrets), podCommand(t, step(jpod, "db-sync"), secrets), podCommand(t, wait, secrets))
	// heat-server, both APIs and the engine in one process, as its Deployment runs it.
	sc := containerByName(server.Containers, "heat-server")
	script.WriteString(podFiles(t, server, sc, hdir, work, done, secrets))
	// heat-check, as the pod runs it before the gate: passing with the rendered heat.conf,
	// failing with a configuration whose API pipeline does not exist.
	heatCheck := containerByName(server.InitContainers, "heat-check")
	if heatCheck == nil {
		t.Fatal("heat-server has no heat-check init container")
	}
	if got := heatCheck.Command[3:]; !reflect.DeepEqual(got, []string{"--check", "--config-file", "/etc/heat/heat.conf"}) {
		t.Errorf("heat-check arguments %q, want --check --config-file /etc/heat/heat.conf", got)
	}
	brokenCheck := heatCheck.DeepCopy()
	brokenCheck.Command = append(brokenCheck.Command, "--config-file", "/tmp/heat-broken.conf")
	broken := podCommand(t, brokenCheck, secrets)
	fmt.Fprintf(&script, `t=$(now)
if as %[1]d $S/heat-check.log %[2]s; then result heat_check 0 $(since $t) $(grep -c '^heat-check: the configuration loads' $S/heat-check.log); else result heat_check $? $(since $t); tail -20 $S/heat-check.log; fi
printf '[paste_deploy]\nflavor = nonexistent\n' > $R/tmp/heat-broken.conf; chmod 644 $R/tmp/heat-broken.conf
if as %[1]d $S/heat-check-broken.log %[3]s; then result heat_check_broken 0; else result heat_check_broken 1 $(grep -c 'heat-api-nonexistent' $S/heat-check-broken.log); tail -3 $S/heat-check-broken.log; fi
`, *server.SecurityContext.RunAsUser, podCommand(t, heatCheck, secrets), broken)
	fmt.Fprintf(&script, "serve %d $S/heat-server.log %s\n", *server.SecurityContext.RunAsUser, podCommand(t, sc, secrets))
	// On demand: until a request that is not a probe, the gate answers the kubelet's and
	// osd's probes and a bare TCP connection without importing Heat.
	fmt.Fprintf(&script, `i=0; until grep -q '^heat-server: holding' $S/heat-server.log || [ $i -ge 150 ]; do i=$((i+1)); sleep 0.1; done
result heat_gate_kube_probe $(curl -m 5 -s -o $S/gate.txt -w '%%{http_code}' -A kube-probe/1.31 http://127.0.0.1:8004/) $(grep -c '^heat-server: Heat starts at the first API request$' $S/gate.txt)
result heat_gate_osd_probe $(curl -m 5 -s -o /dev/null -w '%%{http_code}' -A %[2]s http://127.0.0.1:8000/)
(exec 3<>/dev/tcp/127.0.0.1/8004) && result heat_gate_tcp 0 || result heat_gate_tcp 1
sleep 1
result heat_gate_idle_rss_kib $(rss %[1]d)
result heat_gate_started_idle $(grep -c '^heat-server: starting Heat' $S/heat-server.log)
`, *server.SecurityContext.RunAsUser, shq(deploy.ProbeUserAgent))
	for _, api := range heatServices {
		url := fmt.Sprintf("http://127.0.0.1:%d/", api.port)
		fmt.Fprintf(&script, "result %s $(wait_http %s 120) $(since $t)\ncurl -m 10 -s %s > $S/%s.json\n", api.name, shq(url), shq(url), api.name)
	}
	// The engine's readiness probe of the HA layout (heat-engine alone) against this
	// namespace's /proc/net/tcp: failing without a connection to port 5672, passing with one.
	ha, _, _ := hhRender(t, "heat", hhOverrides("heat", map[string]any{"replicas": 3}))
	engineProbe := shArgs(containerByName(ha.deployments["heat-engine"].Spec.Template.Spec.Containers, "heat-engine").ReadinessProbe.Exec.Command)
	fmt.Fprintf(&script, `if as %d $S/probe.log %s; then result engine_probe_unconnected 0; else result engine_probe_unconnected 1; fi
serve 65534 $S/listener.log python3 -c 'import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", 5672)); s.listen(8)
c = socket.create_connection(("127.0.0.1", 5672)); a = s.accept(); print("connected", flush=True); time.sleep(600)'
i=0; until grep -q connected $S/listener.log || [ $i -ge 50 ]; do i=$((i+1)); sleep 0.2; done
if as %d $S/probe.log %s; then result engine_probe_connected 0; else result engine_probe_connected 1; fi
`, uid, engineProbe, uid, engineProbe)
	fmt.Fprintf(&script, `result heat_rss_kib $(rss %[1]d)
result heat_gate_started $(grep -c '^heat-server: starting Heat for a request on port 8004 (GET)$' $S/heat-server.log)
ps -u %[1]d -o pid=,rss=,args= | cut -c1-120
result heat_server_processes $(ps -u %[1]d -o args= | grep -c '^/usr/bin/python3 -c # heat-server:' || true)
result heat_server_services $(grep -c 'heat-server running api, api_cfn, engine in one process' $S/heat-server.log || true)
result heat_engine_critical $(grep -c CRITICAL $S/heat-server.log || true)
`, uid)

	// Keystone answering, heat's registration steps twice each, then what they made.
	kurl := fmt.Sprintf("http://127.0.0.1:%d%s", kprobe.Port.IntValue(), kprobe.Path)
	fmt.Fprintf(&script, "result keystone $(wait_http %s 120)\n", shq(kurl))
	regSteps := []string{"keystone-register", "keystone-register-cfn", "stack-domain"}
	for run := 1; run <= 2; run++ {
		for _, name := range regSteps {
			fmt.Fprintf(&script, `t=$(now)
if as %d $S/%s-%d.log %s; then result step_%s_%d 0 $(since $t); else result step_%s_%d $? $(since $t); tail -20 $S/%s-%d.log; grep -v ' 200) \| 201) \| 204) \|WARNING' $S/keystone.log | tail -20; fi
`, uid, name, run, podCommand(t, step(jpod, name), secrets), name, run, name, run, name, run)
		}
	}
	// A third run as after a change of the node's address: the public endpoint is moved,
	// not duplicated.
	cfn := step(jpod, "keystone-register-cfn")
	moved := shArgs(append(append(secrets.env(t, cfn), "ENDPOINT_PUBLIC="+movedCfnEndpoint), cfn.Command...))
	fmt.Fprintf(&script, `if as %[1]d $S/moved.log %[2]s; then result step_moved 0 $(grep -c '^moved public endpoint' $S/moved.log); else result step_moved $?; cat $S/moved.log; fi
`, uid, moved)
	reg := step(jpod, "keystone-register")
	// The admin credentials of the step, for Debian's openstack client: the catalog's
	// in-cluster identity endpoint (internal), not the public NodePort.
	admin := []string{"OS_INTERFACE=internal", "OS_IDENTITY_API_VERSION=3"}
	for _, e := range secrets.env(t, reg) {
		if strings.HasPrefix(e, "OS_") {
			admin = append(admin, e)
		}
	}
	osc := func(env []string, args ...string) string {
		return shArgs(append(append(append([]string{}, admin...), env...), append([]string{"openstack"}, args...)...))
	}
	domainAdmin := []string{"OS_USERNAME=heat_domain_admin", "OS_USER_DOMAIN_NAME=heat", "OS_DOMAIN_NAME=heat", "OS_PROJECT_NAME=", "OS_PROJECT_DOMAIN_NAME=", "OS_PASSWORD=" + secrets.value(t, "heat-domain/password")}
	fmt.Fprintf(&script, `as %[1]d $S/endpoints.txt %[2]s; sed 's/^/RESULT endpoint /' $S/endpoints.txt
as %[1]d $S/roles.txt %[3]s; sed 's/^/RESULT domain_admin_role /' $S/roles.txt
as %[1]d $S/roles.txt %[4]s; sed 's/^/RESULT admin_role /' $S/roles.txt
as %[1]d $S/roles.txt %[5]s; sed 's/^/RESULT role /' $S/roles.txt
as %[1]d $S/roles.txt %[9]s; sed 's/^/RESULT service_user_role /' $S/roles.txt
if as %[1]d $S/token.txt %[6]s; then result domain_admin_token 0; else result domain_admin_token 1; cat $S/token.txt; fi
as %[1]d $S/token.txt %[7]s && token=$(cat $S/token.txt) || token=none
project=$(chroot $R env %[8]s openstack project show admin -f value -c id 2>/dev/null || echo none)
result heat_no_token $(curl -m 30 -s -o /dev/null -w '%%{http_code}' http://127.0.0.1:8004/v1/$project/stacks)
result heat_bad_token $(curl -m 30 -s -o /dev/null -w '%%{http_code}' -H "X-Auth-Token: gAAAAABnot-a-token" http://127.0.0.1:8004/v1/$project/stacks)
result heat_admin_token $(curl -m 15 -s -o /dev/null -w '%%{http_code}' -H "X-Auth-Token: $token" http://127.0.0.1:8004/v1/$project/stacks || true)
`, uid,
		osc(nil, "endpoint", "list", "-f", "value", "-c", "Service Name", "-c", "Interface", "-c", "URL"),
		osc(nil, "role", "assignment", "list", "--names", "--domain", "heat", "--user", "heat_domain_admin", "--user-domain", "heat", "-f", "value", "-c", "Role"),
		osc(nil, "role", "assignment", "list", "--names", "--project", "admin", "--project-domain", "Default", "--user", "admin", "--user-domain", "Default", "-f", "value", "-c", "Role"),
		osc(nil, "role", "list", "-f", "value", "-c", "Name"),
		osc(domainAdmin, "token", "issue", "-f", "value", "-c", "id"),
		osc(nil, "token", "issue", "-f", "value", "-c", "id"),
		shArgs(admin),
		osc(nil, "role", "assignment", "list", "--names", "--project", "service", "--project-domain", "Default", "--user", "heat", "--user-domain", "Default", "-f", "value", "-c", "Role"))
	// Last (heat's services could no longer authenticate after it): a run as after a rotated
	// service password sets the password again, and the user authenticates with it.
	heatReg := step(jpod, "keystone-register")
	rotated := shArgs(append(append(secrets.env(t, heatReg), "SVC_PASSWORD="+rotatedHeatPassword), heatReg.Command...))
	heatUser := []string{"OS_USERNAME=heat", "OS_PROJECT_NAME=service", "OS_PASSWORD=" + rotatedHeatPassword}
	fmt.Fprintf(&script, `if as %[1]d $S/rotated.log %[2]s; then result step_rotated 0 $(grep -c '^set the password of user heat$' $S/rotated.log); else result step_rotated $?; cat $S/rotated.log; fi
if as %[1]d $S/token.txt %[3]s; then result rotated_token 0; else result rotated_token 1; cat $S/token.txt; fi
`, uid, rotated, osc(heatUser, "token", "issue", "-f", "value", "-c", "id"))
	script.WriteString("sleep 1\n")

	scratch := t.TempDir()
	scriptPath := filepath.Join(work, "run.sh")
	if err := os.WriteFile(scriptPath, []byte(script.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cmd := exec.Command("unshare", "-n", "-m", "-p", "-f", "--mount-proc", "bash", scriptPath, rootfs, scratch, memBin)
	out, err := cmd.CombinedOutput()
	for _, v := range secrets {
		out = []byte(strings.ReplaceAll(string(out), v, "<secret>"))
	}
	t.Logf("run.sh (%s):\n%s", time.Since(start).Round(time.Second), out)
	logs := func() {
		for _, l := range []string{"keystone.log", "horizon.log", "heat-db-sync.log", "heat-server.log", "memcached.log"} {
			if b, err := os.ReadFile(filepath.Join(scratch, l)); err == nil {
				t.Logf("%s:\n%s", l, tail(string(b), 15))
			}
		}
	}
	if err != nil {
		logs()
		t.Fatalf("run.sh error = %v", err)
	}
	results := map[string][]string{}
	lines := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "RESULT" {
			results[f[1]] = f[2:]
			lines[strings.Join(f[1:], " ")] = true
		}
	}
	field := func(key string, i int) string {
		if len(results[key]) <= i {
			return ""
		}
		return results[key][i]
	}
	failed := false
	check := func(key string, i int, want string) {
		if got := field(key, i); got != want {
			t.Errorf("%s = %q, want %q", key, got, want)
			failed = true
		}
	}
	check("horizon_check", 0, "0")
	check("horizon_probe", 0, "200")
	check("horizon_login", 0, "200")
	// Until a request reaches the dashboard, its mod_wsgi process holds no Django.
	idle, _ := strconv.Atoi(field("horizon_idle_rss_kib", 0))
	loaded, _ := strconv.Atoi(field("horizon_rss_kib", 0))
	if idle <= 0 || loaded <= 0 || idle*10 > loaded*6 {
		t.Errorf("horizon RSS before any dashboard request %d KiB, after %d KiB: want under 60%% (Django loaded before its first request)", idle, loaded)
		failed = true
	}
	check("horizon_root", 0, "302")
	check("horizon_root", 1, base+"/horizon/")
	check("horizon_css", 1, "200")
	if !strings.HasPrefix(field("horizon_css", 0), "/horizon/static/dashboard/css/output.") {
		t.Errorf("login page links CSS %q, want the offline-compressed /horizon/static/dashboard/css/output.*.css", field("horizon_css", 0))
		failed = true
	}
	check("heat_wait_db_before", 0, "1") // sys.exit with the message
	check("heat_wait_db_before", 1, "1")
	check("heat_wait_db_before", 2, "1")
	check("heat_wait_db_before", 3, "0")
	check("heat_db_sync", 0, "0")
	check("heat_wait_db_after", 0, "0")
	check("heat_check", 0, "0")
	check("heat_check", 2, "1")
	check("heat_check_broken", 0, "1")
	if n, _ := strconv.Atoi(field("heat_check_broken", 1)); n < 1 {
		t.Errorf("heat-check with a missing paste pipeline failed without naming it (heat-api-nonexistent)")
		failed = true
	}
	check("heat_gate_kube_probe", 0, "200")
	check("heat_gate_kube_probe", 1, "1")
	check("heat_gate_osd_probe", 0, "200")
	check("heat_gate_tcp", 0, "0")
	check("heat_gate_started_idle", 0, "0")
	// The first request (curl's GET / on heat-api) started Heat, and was answered by it.
	check("heat_gate_started", 0, "1")
	check("heat-api", 0, "300")
	check("heat-api-cfn", 0, "300")
	gateRSS, _ := strconv.Atoi(field("heat_gate_idle_rss_kib", 0))
	heatRSS, _ := strconv.Atoi(field("heat_rss_kib", 0))
	if gateRSS <= 0 || gateRSS > 30*1024 || heatRSS < 3*gateRSS {
		t.Errorf("heat-server RSS %d KiB before its first request, %d KiB after: want under 30 MiB before and Heat loaded after", gateRSS, heatRSS)
		failed = true
	}
	check("engine_probe_unconnected", 0, "1")
	check("engine_probe_connected", 0, "0")
	check("heat_engine_critical", 0, "0")
	// One process: the engine did not fork workers, the APIs none (without RabbitMQ the
	// engine retries, it does not exit).
	check("heat_server_processes", 0, "1")
	check("heat_server_services", 0, "1")
	for _, api := range []string{"heat-api", "heat-api-cfn"} {
		b, _ := os.ReadFile(filepath.Join(scratch, api+".json"))
		if !strings.Contains(string(b), `"versions"`) || !strings.Contains(string(b), `"CURRENT"`) {
			t.Errorf("%s GET / = %s, want the version document", api, b)
			failed = true
		}
	}
	check("keystone", 0, "200")
	for run := 1; run <= 2; run++ {
		for _, name := range regSteps {
			check(fmt.Sprintf("step_%s_%d", name, run), 0, "0")
		}
	}
	check("step_moved", 0, "0")
	check("step_moved", 1, "1")
	check("step_rotated", 0, "0")
	check("step_rotated", 1, "1")
	check("rotated_token", 0, "0")
	for _, want := range []string{
		"endpoint heat public http://127.0.0.1:30004/v1/%(tenant_id)s",
		"endpoint heat internal http://heat-api.openstack.svc:8004/v1/%(tenant_id)s",
		"endpoint heat admin http://heat-api.openstack.svc:8004/v1/%(tenant_id)s",
		"endpoint heat-cfn public " + movedCfnEndpoint,
		"endpoint heat-cfn internal http://heat-api-cfn.openstack.svc:8000/v1",
		"endpoint heat-cfn admin http://heat-api-cfn.openstack.svc:8000/v1",
		"domain_admin_role admin",
		"admin_role heat_stack_owner",
		"role heat_stack_owner",
		"role heat_stack_user",
		// A service user's token is a service's (Cinder's service_token_roles): without
		// the role Cinder refuses Nova's deletion of an attachment and a detached volume
		// stays "detaching".
		"service_user_role admin",
		"service_user_role service",
	} {
		if !lines[want] {
			t.Errorf("after the registration steps, no %q", want)
			failed = true
		}
	}
	endpoints := 0
	for l := range lines {
		if strings.HasPrefix(l, "endpoint heat") {
			endpoints++
		}
	}
	if endpoints != 6 {
		t.Errorf("heat and heat-cfn have %d endpoints after three runs, want 6", endpoints)
		failed = true
	}
	check("domain_admin_token", 0, "0")
	check("heat_no_token", 0, "401")
	check("heat_bad_token", 0, "401")
	// A valid token passes keystone_authtoken (which validates it with the heat user the
	// Job registered); the request then waits on RabbitMQ, which does not run here, so it
	// ends in a 5xx or in curl's timeout (000), never in a 401.
	if got := field("heat_admin_token", 0); got == "401" || got == "" {
		t.Errorf("heat-api with an admin token = %q, want it past keystone_authtoken (not 401)", got)
		failed = true
	}
	if failed {
		logs()
	}
	t.Logf("keystone setup %s s; horizon: check %s s, login page after %s s, RSS %s KiB before the first request and %s KiB after (uid 905); heat: db_sync %s s, heat-check %s s, heat-api %s s, heat-api-cfn %s s after start, RSS of heat-server %s KiB before its first request and %s KiB after; steps (1st run) keystone-register %s s, keystone-register-cfn %s s, stack-domain %s s; (2nd run) %s s, %s s, %s s",
		field("keystone_setup", 0), field("horizon_check", 1), field("horizon_login", 1), field("horizon_idle_rss_kib", 0), field("horizon_rss_kib", 0), field("heat_db_sync", 1), field("heat_check", 1), field("heat-api", 1), field("heat-api-cfn", 1), field("heat_gate_idle_rss_kib", 0), field("heat_rss_kib", 0),
		field("step_keystone-register_1", 1), field("step_keystone-register-cfn_1", 1), field("step_stack-domain_1", 1),
		field("step_keystone-register_2", 1), field("step_keystone-register-cfn_2", 1), field("step_stack-domain_2", 1))
}

// TestHeatSchemaFollowsRelease: heat's wait-db step reads the schema where the release
// writes it down: Zed's sqlalchemy-migrate repository, Alembic's versions on Epoxy (a Zed
// path there fails the step: the directory is gone).
func TestHeatSchemaFollowsRelease(t *testing.T) {
	for _, c := range []struct{ release, want string }{
		{"", "migrate:heat/db/sqlalchemy/migrate_repo"},
		{"zed", "migrate:heat/db/sqlalchemy/migrate_repo"},
		{"epoxy", "alembic:heat/db/migrations"},
	} {
		out, err := renderOutput(t, "heat", deploy.DeploymentSpec{Release: c.release, Images: testImages})
		if err != nil {
			t.Fatalf("render heat on %q: %v", c.release, err)
		}
		if !strings.Contains(out, c.want) {
			t.Errorf("heat on release %q: the wait-db step lacks %s", c.release, c.want)
		}
	}
}
