package charts

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/osdcloud/osd/daemon/deploy"
	"github.com/osdcloud/osd/daemon/deploy/helmclient"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// apiChart describes what the glance and placement charts must render.
type apiChart struct {
	chart      string
	deployment string            // Deployment and Service name
	container  string            // main container of the Deployment
	command    []string          // its command
	port       int32             // container, Service and probe port
	nodePort   int32             // default NodePort
	probePath  string            // HTTP path of every probe
	uid        int64             // service user
	files      map[string]string // config file -> values key under conf
	mounts     map[string]string // config file -> path in the API container
	steps      []string          // init Job steps in order
	dbSync     []string          // db-sync command
	waitDB     []string          // the Deployment's wait-db arguments (nil: no wait-db step)
	database   string            // database and user of db-create
	dbSecret   string            // Secret with the database user's password
	ksSecret   string            // Secret with the Keystone service user's password
	svcType    string            // Keystone service type
	endpoints  map[string]string // default Keystone endpoints
	ini        map[string][]string
}

var apiCharts = []apiChart{
	{
		chart: "placement", deployment: "placement-api", container: "placement",
		command: []string{"uwsgi", "--ini", "/etc/placement/uwsgi-osd.ini"},
		port:    8778, nodePort: 30778, probePath: "/", uid: 903,
		files:    map[string]string{"placement.conf": "placement", "uwsgi.ini": "uwsgi"},
		mounts:   map[string]string{"placement.conf": "/etc/placement/placement.conf", "uwsgi.ini": "/etc/placement/uwsgi-osd.ini"},
		steps:    []string{"config-render", "db-create", "db-sync", "keystone-register"},
		dbSync:   []string{"placement-manage", "--config-file", "/etc/placement/placement.conf", "db", "sync"},
		waitDB:   []string{"/etc/placement/placement.conf", "placement_database", "alembic:placement/db/sqlalchemy/alembic", "placement-init", "1800"},
		database: "placement", dbSecret: "placement-db", ksSecret: "placement-keystone", svcType: "placement",
		endpoints: map[string]string{"public": "http://127.0.0.1:30778", "internal": "http://placement-api.openstack.svc:8778", "admin": "http://placement-api.openstack.svc:8778"},
		ini: map[string][]string{
			"placement.conf": {
				"[api]\nauth_strategy = keystone\n",
				"auth_url = http://keystone-api.openstack.svc:5000/v3\n",
				"www_authenticate_uri = ",
				"memcached_servers = memcached:11211\n",
				"auth_type = password\n", "project_domain_name = Default\n", "user_domain_name = Default\n",
				"project_name = service\n", "username = placement\n",
				"password = @@PLACEMENT_KEYSTONE_PASSWORD@@\n",
				"[placement_database]\nconnection = mysql+pymysql://placement:@@PLACEMENT_DB_PASSWORD@@@mariadb.openstack.svc/placement\n",
			},
			"uwsgi.ini": {
				"http11-socket = :8778\n", "add-header = Connection: close\n", "processes = 1\n", "threads = 4\n",
				"wsgi-file = /usr/bin/placement-api\n", "plugin = python3\n",
			},
		},
	},
	{
		chart: "glance", deployment: "glance-api", container: "glance-api",
		// What /usr/bin/glance-api runs, after osd-lib.mallocTrim (TestMallocTrim).
		command: []string{"/usr/bin/python3", "-c", "import sys\nfrom glance.cmd.api import main\nsys.exit(main())\n", "--config-file", "/etc/glance/glance-api.conf"},
		port:    9292, nodePort: 30292, probePath: "/healthcheck", uid: 64062,
		files:    map[string]string{"glance-api.conf": "glance"},
		mounts:   map[string]string{"glance-api.conf": "/etc/glance/glance-api.conf"},
		steps:    []string{"config-render", "db-create", "db-sync", "keystone-register"},
		dbSync:   []string{"glance-manage", "--config-file", "/etc/glance/glance-api.conf", "db_sync"},
		database: "glance", dbSecret: "glance-db", ksSecret: "glance-keystone", svcType: "image",
		endpoints: map[string]string{"public": "http://127.0.0.1:30292", "internal": "http://glance-api.openstack.svc:9292", "admin": "http://glance-api.openstack.svc:9292"},
		ini: map[string][]string{
			"glance-api.conf": {
				"[DEFAULT]\nbind_port = 9292\n", "workers = 0\n", "enabled_backends = file:file\n",
				"[glance_store]\ndefault_backend = file\n",
				"[file]\nfilesystem_store_datadir = /var/lib/glance/images/\n",
				"[database]\nconnection = mysql+pymysql://glance:@@GLANCE_DB_PASSWORD@@@mariadb.openstack.svc/glance\n",
				"auth_url = http://keystone-api.openstack.svc:5000/v3\n", "memcached_servers = memcached:11211\n",
				"username = glance\n", "password = @@GLANCE_KEYSTONE_PASSWORD@@\n",
				"[paste_deploy]\nconfig_file = /usr/share/glance-common/glance-api-paste.ini\nflavor = keystone\n",
			},
		},
	},
}

// typedObjects holds a chart's objects decoded into the Kubernetes types.
type typedObjects struct {
	deployment *appsv1.Deployment
	job        *batchv1.Job
	service    *corev1.Service
	secrets    []*corev1.Secret
}

func decodeTyped(t *testing.T, objs []object) typedObjects {
	t.Helper()
	var out typedObjects
	for _, o := range objs {
		obj := decodeObject(t, o)
		switch v := obj.(type) {
		case *appsv1.Deployment:
			out.deployment = v
		case *batchv1.Job:
			out.job = v
		case *corev1.Service:
			out.service = v
		case *corev1.Secret:
			out.secrets = append(out.secrets, v)
		default:
			t.Fatalf("unexpected object %T %s", obj, o.Metadata.Name)
		}
	}
	if out.deployment == nil || out.job == nil || out.service == nil || len(out.secrets) != 1 {
		t.Fatalf("objects = %v, want one Deployment, Job, Service and config Secret", kinds(objs))
	}
	return out
}

func renderAPI(t *testing.T, chart string, spec deploy.DeploymentSpec) (typedObjects, string, map[string]any) {
	t.Helper()
	svc, ok := deploy.DefaultCatalog().Service(chart)
	if !ok {
		t.Fatalf("catalog has no %s", chart)
	}
	objs, out := render(t, FS, chart, svc, spec)
	ch, _, err := helmclient.LoadChart(FS, chart)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := deploy.Render(spec, svc, ch.Values)
	if err != nil {
		t.Fatal(err)
	}
	return decodeTyped(t, objs), out, vals
}

func containerByName(cs []corev1.Container, name string) *corev1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

func envByName(c *corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func TestAPICharts(t *testing.T) {
	spec := deploy.DeploymentSpec{Images: testImages}
	for _, tt := range apiCharts {
		t.Run(tt.chart, func(t *testing.T) {
			objs, _, vals := renderAPI(t, tt.chart, spec)

			t.Run("config", func(t *testing.T) {
				conf := vals["conf"].(map[string]any)
				data := objs.secrets[0].StringData
				if objs.secrets[0].Name != tt.chart+"-config" || len(data) != len(tt.files) {
					t.Fatalf("config Secret %s has files %v, want %s-config with %v", objs.secrets[0].Name, data, tt.chart, tt.files)
				}
				for file, key := range tt.files {
					want, err := deploy.RenderINI(sections(t, conf[key]))
					if err != nil {
						t.Fatal(err)
					}
					if data[file] != want {
						t.Errorf("%s-config %s =\n%s\nwant (deploy.RenderINI)\n%s", tt.chart, file, data[file], want)
					}
					for _, line := range tt.ini[file] {
						if !strings.Contains(data[file], line) {
							t.Errorf("%s lacks %q:\n%s", file, line, data[file])
						}
					}
				}
			})

			t.Run("job", func(t *testing.T) {
				job := objs.job
				if !strings.HasPrefix(job.Name, tt.chart+"-init-") || job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
					t.Errorf("Job %s restartPolicy %s, want %s-init-<hash>, Never", job.Name, job.Spec.Template.Spec.RestartPolicy, tt.chart)
				}
				sc := job.Spec.Template.Spec.SecurityContext
				if sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != tt.uid || sc.FSGroup == nil || *sc.FSGroup != tt.uid {
					t.Errorf("Job securityContext = %+v, want uid and fsGroup %d", sc, tt.uid)
				}
				all := podContainers(job.Spec.Template.Spec)
				var names []string
				for _, c := range all {
					names = append(names, c.Name)
				}
				if !reflect.DeepEqual(names, tt.steps) || len(job.Spec.Template.Spec.Containers) != 1 {
					t.Fatalf("Job steps = %v (last is the main container), want %v", names, tt.steps)
				}
				dbc := containerByName(all, "db-create")
				for name, want := range map[string]string{"DB_NAME": tt.database, "DB_USER": tt.database} {
					if e := envByName(dbc, name); e == nil || e.Value != want {
						t.Errorf("db-create env %s = %+v, want %q", name, e, want)
					}
				}
				if e := envByName(dbc, "DB_PASSWORD"); e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef.Name != tt.dbSecret {
					t.Errorf("db-create DB_PASSWORD = %+v, want from Secret %s", e, tt.dbSecret)
				}
				sync := containerByName(all, "db-sync")
				if !reflect.DeepEqual(sync.Command, tt.dbSync) {
					t.Errorf("db-sync command = %v, want %v", sync.Command, tt.dbSync)
				}
				var synced bool
				for _, m := range sync.VolumeMounts {
					if m.Name == "config" && m.MountPath == tt.dbSync[2] {
						synced = true
					}
				}
				if !synced {
					t.Errorf("db-sync mounts %v, want the rendered config at %s", sync.VolumeMounts, tt.dbSync[2])
				}
				reg := containerByName(all, "keystone-register")
				for name, want := range map[string]string{"SVC_NAME": tt.chart, "SVC_USER": tt.chart, "SVC_TYPE": tt.svcType, "OS_AUTH_URL": "http://keystone-api.openstack.svc:5000/v3"} {
					if e := envByName(reg, name); e == nil || e.Value != want {
						t.Errorf("keystone-register env %s = %+v, want %q", name, e, want)
					}
				}
				if e := envByName(reg, "SVC_PASSWORD"); e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef.Name != tt.ksSecret {
					t.Errorf("keystone-register SVC_PASSWORD = %+v, want from Secret %s", e, tt.ksSecret)
				}
				for _, iface := range []string{"admin", "internal", "public"} {
					if e := envByName(reg, "ENDPOINT_"+strings.ToUpper(iface)); e == nil || e.Value != tt.endpoints[iface] {
						t.Errorf("keystone-register %s endpoint = %+v, want %q", iface, e, tt.endpoints[iface])
					}
				}
				if n := len(reg.Command); n < 2 || reg.Command[0] != "python3" || reg.Command[n-1] != "register" {
					t.Errorf("keystone-register runs %q ... %q, want the keystone program in mode register", reg.Command[0], reg.Command[n-1])
				}
			})

			t.Run("deployment", func(t *testing.T) {
				pod := objs.deployment.Spec.Template.Spec
				if objs.deployment.Name != tt.deployment || *objs.deployment.Spec.Replicas != 1 {
					t.Errorf("Deployment %s replicas %d, want %s, 1", objs.deployment.Name, *objs.deployment.Spec.Replicas, tt.deployment)
				}
				if sc := pod.SecurityContext; sc == nil || *sc.RunAsUser != tt.uid || *sc.RunAsGroup != tt.uid || *sc.FSGroup != tt.uid || !*sc.RunAsNonRoot {
					t.Errorf("pod securityContext = %+v, want non-root uid/gid/fsGroup %d", sc, tt.uid)
				}
				c := containerByName(pod.Containers, tt.container)
				if c == nil || len(pod.Containers) != 1 {
					t.Fatalf("containers = %v, want only %s", pod.Containers, tt.container)
				}
				command := c.Command
				if len(command) > 2 && command[0] == "/usr/bin/python3" {
					command = withoutMallocTrim(t, c.Name, command, 30)
				}
				if !reflect.DeepEqual(command, tt.command) || c.Image != testImages["openstack"] || c.ImagePullPolicy != corev1.PullNever {
					t.Errorf("%s = %v %s %s, want %v %s Never", c.Name, c.Command, c.Image, c.ImagePullPolicy, tt.command, testImages["openstack"])
				}
				if len(c.Ports) != 1 || c.Ports[0].ContainerPort != tt.port {
					t.Errorf("%s ports = %v, want %d", c.Name, c.Ports, tt.port)
				}
				for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
					if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != tt.probePath || p.HTTPGet.Port.IntValue() != int(tt.port) {
						t.Errorf("%s %s probe = %+v, want GET %s on %d", c.Name, name, p, tt.probePath, tt.port)
					}
				}
				for file, path := range tt.mounts {
					found := false
					for _, m := range c.VolumeMounts {
						if m.Name == "config" && m.SubPath == file && m.MountPath == path && m.ReadOnly {
							found = true
						}
					}
					if !found {
						t.Errorf("%s mounts %v, want config %s at %s", c.Name, c.VolumeMounts, file, path)
					}
				}
				if c.Resources.Limits.Memory().IsZero() {
					t.Errorf("%s has no memory limit", c.Name)
				}
				var inits []string
				for _, c := range pod.InitContainers {
					inits = append(inits, c.Name)
				}
				// config-render last, or followed by wait-db.
				want := []string{"config-render"}
				if tt.waitDB != nil {
					want = append(want, "wait-db")
				}
				if len(inits) < len(want) || !slices.Equal(inits[len(inits)-len(want):], want) {
					t.Errorf("init containers = %v, want them to end with %v", inits, want)
				} else if tt.waitDB != nil {
					checkWaitDBStep(t, pod.InitContainers[len(inits)-1], tt.waitDB)
				}
				if objs.deployment.Spec.Template.Annotations["checksum/config"] != objs.job.Spec.Template.Annotations["checksum/config"] {
					t.Errorf("Deployment and Job config checksums differ")
				}
			})

			t.Run("service", func(t *testing.T) {
				s := objs.service
				if s.Name != tt.deployment || s.Spec.Type != corev1.ServiceTypeNodePort || len(s.Spec.Ports) != 1 {
					t.Fatalf("Service %s type %s ports %v, want %s NodePort", s.Name, s.Spec.Type, s.Spec.Ports, tt.deployment)
				}
				p := s.Spec.Ports[0]
				if p.Port != tt.port || p.TargetPort.IntValue() != int(tt.port) || p.NodePort != tt.nodePort {
					t.Errorf("Service port = %d -> %s nodePort %d, want %d -> %d nodePort %d", p.Port, p.TargetPort.String(), p.NodePort, tt.port, tt.port, tt.nodePort)
				}
				if !reflect.DeepEqual(s.Spec.Selector, objs.deployment.Spec.Selector.MatchLabels) {
					t.Errorf("Service selector %v != Deployment selector %v", s.Spec.Selector, objs.deployment.Spec.Selector.MatchLabels)
				}
			})
		})
	}
}

// TestAPIChartsOverrides checks the values the lead sets per host: the public endpoint with
// the node address, a ClusterIP Service, a config change (new Job, new checksum) and the
// HA profile's replicas.
func TestAPIChartsOverrides(t *testing.T) {
	for _, tt := range apiCharts {
		t.Run(tt.chart, func(t *testing.T) {
			base, _, _ := renderAPI(t, tt.chart, deploy.DeploymentSpec{Images: testImages})
			public := fmt.Sprintf("http://192.0.2.10:%d", tt.nodePort)
			spec := deploy.DeploymentSpec{Images: testImages, Services: map[string]deploy.ServiceSpec{tt.chart: {Overrides: map[string]any{
				"endpoints": map[string]any{"public": public},
				"service":   map[string]any{"type": "ClusterIP"},
				"conf":      map[string]any{tt.files[firstFile(tt)]: map[string]any{"DEFAULT": map[string]any{"debug": true}}},
			}}}}
			objs, _, _ := renderAPI(t, tt.chart, spec)
			jobSpec := objs.job.Spec.Template.Spec
			reg := containerByName(podContainers(jobSpec), "keystone-register")
			if e := envByName(reg, "ENDPOINT_PUBLIC"); e == nil || e.Value != public {
				t.Errorf("keystone-register does not register the overridden public endpoint %s", public)
			}
			if s := objs.service; s.Spec.Type != corev1.ServiceTypeClusterIP || s.Spec.Ports[0].NodePort != 0 {
				t.Errorf("Service with service.type ClusterIP = %s nodePort %d, want ClusterIP without nodePort", s.Spec.Type, s.Spec.Ports[0].NodePort)
			}
			if objs.job.Name == base.job.Name || objs.deployment.Spec.Template.Annotations["checksum/config"] == base.deployment.Spec.Template.Annotations["checksum/config"] {
				t.Errorf("config change kept Job %s and the pod checksum, want a new Job and checksum", objs.job.Name)
			}
			again, _, _ := renderAPI(t, tt.chart, deploy.DeploymentSpec{Images: testImages})
			if again.job.Name != base.job.Name {
				t.Errorf("same values gave Jobs %s and %s, want one name", base.job.Name, again.job.Name)
			}
			ha, _, _ := renderAPI(t, tt.chart, deploy.DeploymentSpec{Images: testImages, Profile: deploy.ProfileHA})
			if *ha.deployment.Spec.Replicas != 3 {
				t.Errorf("HA profile replicas = %d, want 3", *ha.deployment.Spec.Replicas)
			}
		})
	}
}

// firstFile is the chart's main config file (the one holding DEFAULT), not uwsgi.ini.
func firstFile(tt apiChart) string {
	keys := make([]string, 0, len(tt.files))
	for k := range tt.files {
		if k != "uwsgi.ini" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys[0]
}

// TestGlanceImageStore checks the file store: a hostPath (values-configurable, or an
// emptyDir) at the datadir glance-api.conf names, given to the glance user by a root
// init container before anything else runs.
func TestGlanceImageStore(t *testing.T) {
	tests := []struct {
		name     string
		hostPath any // persistence.hostPath override; nil = chart default
		want     string
	}{
		{name: "default", want: "/var/lib/osd/volumes/glance"},
		{name: "custom", hostPath: "/srv/osd/glance", want: "/srv/osd/glance"},
		{name: "emptyDir", hostPath: "", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := deploy.DeploymentSpec{Images: testImages}
			if tt.hostPath != nil {
				spec.Services = map[string]deploy.ServiceSpec{"glance": {Overrides: map[string]any{"persistence": map[string]any{"hostPath": tt.hostPath}}}}
			}
			objs, _, vals := renderAPI(t, "glance", spec)
			pod := objs.deployment.Spec.Template.Spec
			var vol *corev1.Volume
			for i := range pod.Volumes {
				if pod.Volumes[i].Name == "images" {
					vol = &pod.Volumes[i]
				}
			}
			switch {
			case vol == nil:
				t.Fatalf("glance-api has no images volume: %v", pod.Volumes)
			case tt.want == "" && (vol.HostPath != nil || vol.EmptyDir == nil):
				t.Errorf("images volume = %+v, want an emptyDir", vol.VolumeSource)
			case tt.want != "" && (vol.HostPath == nil || vol.HostPath.Path != tt.want || *vol.HostPath.Type != corev1.HostPathDirectoryOrCreate):
				t.Errorf("images volume = %+v, want hostPath %s DirectoryOrCreate", vol.VolumeSource, tt.want)
			}
			datadir := vals["conf"].(map[string]any)["glance"].(map[string]any)["file"].(map[string]any)["filesystem_store_datadir"].(string)
			mountedAt := func(c corev1.Container) string {
				for _, m := range c.VolumeMounts {
					if m.Name == "images" {
						return m.MountPath
					}
				}
				return ""
			}
			api := containerByName(pod.Containers, "glance-api")
			if got := mountedAt(*api); got == "" || strings.TrimSuffix(datadir, "/") != got {
				t.Errorf("glance-api mounts images at %q, want the file store datadir %s", got, datadir)
			}
			chown := pod.InitContainers[0]
			sc := chown.SecurityContext
			if chown.Name != "chown-images" || sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 0 || *sc.RunAsNonRoot {
				t.Fatalf("first init container = %s %+v, want chown-images as root", chown.Name, sc)
			}
			want := []string{"chown", "64062:64062", mountedAt(*api)}
			if !reflect.DeepEqual(chown.Command, want) || mountedAt(chown) != mountedAt(*api) || chown.ImagePullPolicy != corev1.PullNever {
				t.Errorf("chown-images = %v mounting %s, want %v on the same mount", chown.Command, mountedAt(chown), want)
			}
			for _, c := range append(pod.InitContainers[1:], pod.Containers...) {
				if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
					t.Errorf("%s overrides the pod user, only chown-images may", c.Name)
				}
			}
			// The reserved import stores stay on the same volume.
			for _, store := range []string{"os_glance_staging_store", "os_glance_tasks_store"} {
				dir, _ := vals["conf"].(map[string]any)["glance"].(map[string]any)[store].(map[string]any)["filesystem_store_datadir"].(string)
				if !strings.HasPrefix(dir, mountedAt(*api)+"/") {
					t.Errorf("%s datadir = %q, want under %s", store, dir, mountedAt(*api))
				}
			}
		})
	}
}

var placeholderRE = regexp.MustCompile(`@@([A-Z0-9_]+)@@`)

// TestAPIChartsSecrets checks that secrets reach the pods only through Secret references:
// every reference names a Secret and key deploy.DefaultSecrets generates, nothing
// password-like is a literal, config files hold placeholders only, and the config-render
// script (run here with /bin/sh) replaces every placeholder with its Secret's value.
func TestAPIChartsSecrets(t *testing.T) {
	generated := map[string]bool{}
	for _, s := range deploy.DefaultSecrets() {
		for k := range s.Keys {
			generated[s.Name+"/"+k] = true
		}
	}
	for _, tt := range apiCharts {
		t.Run(tt.chart, func(t *testing.T) {
			objs, out, vals := renderAPI(t, tt.chart, deploy.DeploymentSpec{Images: testImages})
			for _, want := range []string{tt.dbSecret + "/password", tt.ksSecret + "/password"} {
				if !generated[want] {
					t.Errorf("deploy.DefaultSecrets() lacks %s", want)
				}
			}
			pods := map[string]corev1.PodSpec{"Deployment": objs.deployment.Spec.Template.Spec, "Job": objs.job.Spec.Template.Spec}
			for kind, pod := range pods {
				for _, c := range podContainers(pod) {
					for _, e := range c.Env {
						if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
							if ref := e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key; !generated[ref] {
								t.Errorf("%s %s env %s refers to %s, which deploy.DefaultSecrets() does not make", kind, c.Name, e.Name, ref)
							}
						} else if strings.Contains(e.Name, "PASSWORD") {
							t.Errorf("%s %s env %s is a literal", kind, c.Name, e.Name)
						}
					}
				}
			}

			// Values carry placeholders only: every password key and URL password.
			checkPlaceholders(t, vals, regexp.MustCompile(`(?i)password|secret`))
			if len(objs.secrets) != 1 || objs.secrets[0].Data != nil {
				t.Errorf("chart renders Secrets %v, want only its config Secret (stringData)", objs.secrets)
			}

			// Run config-render for real over the config Secret with made-up Secret values.
			if _, err := exec.LookPath("sed"); err != nil {
				t.Fatalf("sed is not installed: %v", err)
			}
			for kind, pod := range pods {
				render := containerByName(pod.InitContainers, "config-render")
				if render == nil {
					t.Fatalf("%s has no config-render step", kind)
				}
				conf, values := runConfigRender(t, render, objs.secrets[0].StringData)
				for name, data := range objs.secrets[0].StringData {
					got, err := os.ReadFile(filepath.Join(conf, name))
					if err != nil {
						t.Fatal(err)
					}
					want := placeholderRE.ReplaceAllStringFunc(data, func(p string) string {
						v, ok := values[placeholderRE.FindStringSubmatch(p)[1]]
						if !ok {
							t.Errorf("%s: placeholder %s has no config-render env", name, p)
						}
						return v
					})
					if string(got) != want || strings.Contains(string(got), "@@") {
						t.Errorf("%s config-render %s =\n%s\nwant\n%s", kind, name, got, want)
					}
					if fi, _ := os.Stat(filepath.Join(conf, name)); fi.Mode().Perm()&0o007 != 0 {
						t.Errorf("%s config-render %s mode %v, want no access for others", kind, name, fi.Mode())
					}
				}
				for name, v := range values {
					if strings.Contains(out, v) {
						t.Errorf("manifests contain the value of %s", name)
					}
				}
			}
		})
	}
}

// TestCatalogAPICharts checks the catalog entries of glance and placement: enabled,
// depending on what their pods and init Jobs use to start (DNS, the database, the cache;
// not Keystone: their registration step waits for it), with a chart of the same name in
// FS and images the controller knows.
func TestCatalogAPICharts(t *testing.T) {
	cat := deploy.DefaultCatalog()
	levels, err := cat.Levels()
	if err != nil {
		t.Fatalf("DefaultCatalog().Levels() error = %v", err)
	}
	level := map[string]int{}
	for i, names := range levels {
		for _, n := range names {
			level[n] = i
		}
	}
	for _, tt := range apiCharts {
		t.Run(tt.chart, func(t *testing.T) {
			svc, ok := cat.Service(tt.chart)
			if !ok {
				t.Fatalf("catalog has no %s", tt.chart)
			}
			if !svc.Enabled {
				t.Errorf("%s is disabled, want it deployed", tt.chart)
			}
			if svc.Chart != tt.chart || svc.Namespace != deploy.Namespace || !reflect.DeepEqual(svc.Images, []string{"openstack"}) {
				t.Errorf("%s = chart %s namespace %s images %v, want %s, %s, [openstack]", tt.chart, svc.Chart, svc.Namespace, svc.Images, tt.chart, deploy.Namespace)
			}
			// Glance stores into Ceph when the daemon enables it (storage backend ceph).
			wantDeps := map[string][]string{"glance": {"coredns", "mariadb", "memcached", "ceph"}}[tt.chart]
			if wantDeps == nil {
				wantDeps = []string{"coredns", "mariadb", "memcached"}
			}
			if !reflect.DeepEqual(svc.DependsOn, wantDeps) {
				t.Errorf("%s depends on %v, want %v", tt.chart, svc.DependsOn, wantDeps)
			}
			for _, d := range svc.DependsOn {
				dep, ok := cat.Service(d)
				if !ok || (!dep.Enabled && d != "ceph") || level[d] >= level[tt.chart] {
					t.Errorf("%s dependency %s: present %v enabled %v level %d, want enabled below level %d", tt.chart, d, ok, dep.Enabled, level[d], level[tt.chart])
				}
			}
			b, err := fs.ReadFile(FS, tt.chart+"/Chart.yaml")
			if err != nil {
				t.Fatalf("FS lacks %s/Chart.yaml: %v", tt.chart, err)
			}
			var meta struct {
				Name         string `json:"name"`
				Dependencies []struct {
					Name string `json:"name"`
				} `json:"dependencies"`
			}
			if err := yaml.Unmarshal(b, &meta); err != nil || meta.Name != tt.chart || len(meta.Dependencies) != 1 || meta.Dependencies[0].Name != Library {
				t.Errorf("%s/Chart.yaml = %+v (%v), want name %s depending on %s", tt.chart, meta, err, tt.chart, Library)
			}
			for _, img := range svc.Images {
				if testImages[img] == "" {
					t.Errorf("%s uses image %s the tests do not know", tt.chart, img)
				}
			}
		})
	}
}

// runConfigRender runs a config-render step's script with /bin/sh over files (the config
// Secret), its Secret-backed variables set to random hex like deploy's generated
// passwords. It returns the directory of the rendered files and the values it used.
func runConfigRender(t *testing.T, render *corev1.Container, files map[string]string) (string, map[string]string) {
	t.Helper()
	values := map[string]string{}
	for _, e := range render.Env {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		values[e.Name] = hex.EncodeToString(b)
	}
	return runRenderScript(t, render, files, values), values
}

// runRenderScript runs a config-render step's script with /bin/sh over files (the config
// Secret) in a temporary directory, with the variables values, and returns the directory
// of the rendered files.
func runRenderScript(t *testing.T, render *corev1.Container, files, values map[string]string) string {
	t.Helper()
	if len(render.Command) != 3 || render.Command[0] != "/bin/sh" {
		t.Fatalf("config-render command = %v, want /bin/sh -ec SCRIPT", render.Command)
	}
	dir := t.TempDir()
	tmpl, conf := filepath.Join(dir, "templates"), filepath.Join(dir, "config")
	for _, d := range []string{tmpl, conf} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(tmpl, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range values {
		env = append(env, k+"="+v)
	}
	script := strings.NewReplacer("/etc/osd/templates", tmpl, "/etc/osd/config", conf).Replace(render.Command[2])
	cmd := exec.Command(render.Command[0], render.Command[1], script)
	cmd.Env = env
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("config-render: %v\n%s", err, b)
	}
	// The sed script holding the values is gone: only the rendered files stay.
	if ents, err := os.ReadDir(conf); err == nil {
		for _, e := range ents {
			if _, ok := files[e.Name()]; !ok {
				t.Errorf("config-render left %s in the config volume", e.Name())
			}
		}
	}
	return conf
}

// checkWaitDBStep checks a Deployment's wait-db step: osd-lib's program (one Python process,
// nothing of the service imported) with args, the config file it reads mounted.
func checkWaitDBStep(t *testing.T, c corev1.Container, args []string) {
	t.Helper()
	checkPythonCommand(t, c.Command, "osd's wait for a service's database schema", "import ast, configparser", strings.Join(args, " "))
	mounted := false
	for _, m := range c.VolumeMounts {
		mounted = mounted || (m.Name == "config" && m.MountPath == args[0] && m.ReadOnly)
	}
	if !mounted {
		t.Errorf("wait-db mounts %v, want the rendered config at %s", c.VolumeMounts, args[0])
	}
}
