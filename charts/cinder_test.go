package charts

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/osdcloud/osd/daemon/deploy"
	"github.com/osdcloud/osd/daemon/deploy/helmclient"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

type cinderObjects struct {
	deployments map[string]*appsv1.Deployment // api, scheduler, volume, backup
	job         *batchv1.Job
	service     *corev1.Service
	config      *corev1.Secret
}

// cinderSpec is a deployment with the given backend and cinder overrides (the monitor
// address set, as the daemon sets it).
func cinderSpec(backend string, o map[string]any) deploy.DeploymentSpec {
	spec := cephSpec(nil)
	spec.Features.Storage = backend
	spec.Services = map[string]deploy.ServiceSpec{"cinder": {Overrides: deploy.Merge(map[string]any{"ceph": map[string]any{"monHost": "10.0.0.5"}}, o)}}
	return spec
}

func renderCinder(t *testing.T, spec deploy.DeploymentSpec) (cinderObjects, map[string]any) {
	t.Helper()
	svc, ok := deploy.DefaultCatalog().Service("cinder")
	if !ok {
		t.Fatal("catalog has no cinder")
	}
	objs, _ := render(t, FS, "cinder", svc, spec)
	ch, _, err := helmclient.LoadChart(FS, "cinder")
	if err != nil {
		t.Fatal(err)
	}
	vals, err := deploy.Render(spec, svc, ch.Values)
	if err != nil {
		t.Fatal(err)
	}
	c := cinderObjects{deployments: map[string]*appsv1.Deployment{}}
	for _, o := range objs {
		switch v := decodeObject(t, o).(type) {
		case *appsv1.Deployment:
			c.deployments[strings.TrimPrefix(v.Name, "cinder-")] = v
		case *batchv1.Job:
			c.job = v
		case *corev1.Service:
			c.service = v
		case *corev1.Secret:
			c.config = v
		default:
			t.Fatalf("cinder renders an unexpected %T %s", v, o.Metadata.Name)
		}
	}
	if c.job == nil || c.service == nil || c.config == nil || !strings.HasPrefix(c.job.Name, "cinder-init-") {
		t.Fatalf("cinder objects = %v, want Deployments, Job cinder-init-<hash>, Service and Secret cinder-config", kinds(objs))
	}
	return c, vals
}

// renderError renders chart for spec and returns Helm's error.
func renderError(chart string, spec deploy.DeploymentSpec) error {
	svc, _ := deploy.DefaultCatalog().Service(chart)
	ch, _, err := helmclient.LoadChart(FS, chart)
	if err != nil {
		return err
	}
	vals, err := deploy.Render(spec, svc, ch.Values)
	if err != nil {
		return err
	}
	_, err = helmclient.Template(context.Background(), ch, svc.Namespace, svc.Name, deploy.HelmValues(vals, ch.Values))
	return err
}

func (c cinderObjects) pods() map[string]corev1.PodSpec {
	out := map[string]corev1.PodSpec{"Job/cinder-init": c.job.Spec.Template.Spec}
	for n, d := range c.deployments {
		out["Deployment/cinder-"+n] = d.Spec.Template.Spec
	}
	return out
}

func mountsOf(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, m := range c.VolumeMounts {
		if m.SubPath != "" {
			out[m.SubPath] = m.MountPath
		}
	}
	return out
}

// serverCommand is cinder-server's command (files/cinder-server.py) for services, joined
// with spaces.
func serverCommand(t *testing.T, services string) string {
	t.Helper()
	b, err := os.ReadFile("cinder/files/cinder-server.py")
	if err != nil {
		t.Fatal(err)
	}
	return "/usr/bin/python3 -c " + string(b) + " " + services + " --config-file /etc/cinder/cinder.conf"
}

// TestCinderServerProgram: cinder-server's Python compiles, and its service list is checked
// before anything starts (here without Cinder: only the parser runs).
func TestCinderServerProgram(t *testing.T) {
	b, err := os.ReadFile("cinder/files/cinder-server.py")
	if err != nil {
		t.Fatal(err)
	}
	compile := exec.Command("python3", "-c", "import sys; compile(sys.stdin.read(), 'cinder-server', 'exec')")
	compile.Stdin = strings.NewReader(string(b))
	if out, err := compile.CombinedOutput(); err != nil {
		t.Fatalf("cinder-server does not compile: %v\n%s", err, out)
	}
	// The parser alone: the program up to its imports of Cinder.
	src := string(b)
	parser := src[strings.Index(src, "KNOWN = "):strings.Index(src, "def main")]
	for _, tt := range []struct {
		arg, want string
	}{
		{"api,scheduler,volume,backup", "['api', 'scheduler', 'volume', 'backup']"},
		{"api,scheduler", "['api', 'scheduler']"},
		{"api,nova", "want a comma-separated subset of api,scheduler,volume,backup"},
		{"", "want a comma-separated subset"},
	} {
		out, _ := exec.Command("python3", "-c", "import sys\n"+parser+"\nprint(parse_services(sys.argv[1]))", tt.arg).CombinedOutput()
		if !strings.Contains(string(out), tt.want) {
			t.Errorf("parse_services(%q) = %s, want %s", tt.arg, out, tt.want)
		}
	}
}

// TestCinderCeph: as the cinder user, each pod with the files it needs; one process for
// every service with one replica, a Deployment per service with more; RBD volumes and
// backups; Keystone's volumev3 endpoints; the volume type step last.
func TestCinderCeph(t *testing.T) {
	cephFiles := map[string]string{"cinder.conf": "/etc/cinder/cinder.conf", "ceph.conf": "/etc/ceph/ceph.conf",
		"ceph.client.cinder.keyring": "/etc/ceph/ceph.client.cinder.keyring", "ceph.client.cinder-backup.keyring": "/etc/ceph/ceph.client.cinder-backup.keyring"}
	layouts := []struct {
		name       string
		replicas   int
		mounts     map[string]map[string]string
		cmd        map[string]string
		apiPod     string
		serviceFor string
	}{
		{name: "one replica", replicas: 1, apiPod: "server",
			mounts: map[string]map[string]string{"server": cephFiles},
			cmd:    map[string]string{"server": serverCommand(t, "api,scheduler,volume,backup")}},
		{name: "HA", replicas: 3, apiPod: "api",
			mounts: map[string]map[string]string{
				"api":       {"cinder.conf": "/etc/cinder/cinder.conf", "uwsgi.ini": "/etc/cinder/uwsgi-osd.ini"},
				"scheduler": {"cinder.conf": "/etc/cinder/cinder.conf"},
				"volume": {"cinder.conf": "/etc/cinder/cinder.conf", "ceph.conf": "/etc/ceph/ceph.conf",
					"ceph.client.cinder.keyring": "/etc/ceph/ceph.client.cinder.keyring"},
				"backup": cephFiles,
			},
			cmd: map[string]string{"api": "uwsgi --ini /etc/cinder/uwsgi-osd.ini", "scheduler": "cinder-scheduler --config-file /etc/cinder/cinder.conf",
				"volume": serverCommand(t, "volume"), "backup": "cinder-backup --config-file /etc/cinder/cinder.conf"}},
	}
	for _, l := range layouts {
		c, _ := renderCinder(t, cinderSpec("ceph", map[string]any{"replicas": l.replicas}))
		var names, want []string
		for n := range c.deployments {
			names = append(names, n)
		}
		for n := range l.cmd {
			want = append(want, n)
		}
		sort.Strings(names)
		sort.Strings(want)
		if !reflect.DeepEqual(names, want) {
			t.Fatalf("%s: cinder Deployments = %v, want %v", l.name, names, want)
		}
		for n, d := range c.deployments {
			pod := d.Spec.Template.Spec
			if sc := pod.SecurityContext; sc == nil || *sc.RunAsUser != 64061 || !*sc.RunAsNonRoot || pod.HostNetwork {
				t.Errorf("%s: cinder-%s securityContext %+v hostNetwork %v, want the cinder user 64061 on the pod network", l.name, n, sc, pod.HostNetwork)
			}
			main := pod.Containers[0]
			got := strings.Join(main.Command, " ")
			if main.Command[0] == "/usr/bin/python3" {
				got = strings.Join(withoutMallocTrim(t, l.name+": cinder-"+n, main.Command, 30), " ")
			}
			if got != l.cmd[n] {
				t.Errorf("%s: cinder-%s command = %.300s, want %.300s", l.name, n, got, l.cmd[n])
			}
			if got := mountsOf(main); !reflect.DeepEqual(got, l.mounts[n]) {
				t.Errorf("%s: cinder-%s config mounts = %v, want %v", l.name, n, got, l.mounts[n])
			}
			var inits []string
			for _, ic := range pod.InitContainers {
				inits = append(inits, ic.Name)
			}
			if !reflect.DeepEqual(inits, []string{"config-render", "wait-db"}) {
				t.Errorf("%s: cinder-%s init containers = %v, want config-render, wait-db", l.name, n, inits)
			} else {
				checkWaitDBStep(t, pod.InitContainers[1], []string{"/etc/cinder/cinder.conf", "database", "alembic:cinder/db/migrations", "cinder-init", "1800"})
			}
			var env []string
			for _, e := range containerByName(pod.InitContainers, "config-render").Env {
				env = append(env, e.Name)
			}
			wantKeys := map[string]bool{"server": true, "volume": true, "backup": true}[n]
			if strings.Contains(strings.Join(env, ","), "CEPH_CINDER_KEY") != wantKeys {
				t.Errorf("%s: cinder-%s config-render env %v: Ceph key given %t, want %t", l.name, n, env, !wantKeys, wantKeys)
			}
		}
		api := c.deployments[l.apiPod].Spec.Template.Spec.Containers[0]
		if p := api.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthcheck" || p.HTTPGet.Port.IntValue() != 8776 {
			t.Errorf("%s: cinder-%s readiness = %+v, want GET /healthcheck on 8776", l.name, l.apiPod, p)
		}
		if got, want := c.service.Spec.Selector, c.deployments[l.apiPod].Spec.Selector.MatchLabels; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Service cinder-api selects %v, want cinder-%s's %v", l.name, got, l.apiPod, want)
		}
	}
	c, vals := renderCinder(t, cinderSpec("ceph", nil))
	if s := c.service.Spec; s.Type != corev1.ServiceTypeNodePort || s.Ports[0].Port != 8776 || s.Ports[0].NodePort != 30776 {
		t.Errorf("Service cinder-api = %s %d nodePort %d, want NodePort 8776 -> 30776", s.Type, s.Ports[0].Port, s.Ports[0].NodePort)
	}

	conf, err := novaParseINI(c.config.StringData["cinder.conf"])
	if err != nil {
		t.Fatal(err)
	}
	for s, kv := range map[string]map[string]string{
		"DEFAULT": {"enabled_backends": "ceph", "default_volume_type": "ceph", "host": "cinder", "backup_driver": "cinder.backup.drivers.ceph.CephBackupDriver",
			"backup_ceph_user": "cinder-backup", "backup_ceph_pool": "backups", "auth_strategy": "keystone"},
		"ceph": {"volume_driver": "cinder.volume.drivers.rbd.RBDDriver", "volume_backend_name": "ceph", "rbd_pool": "volumes", "rbd_user": "cinder",
			"rbd_secret_uuid": "@@LIBVIRT_SECRET_UUID@@", "max_over_subscription_ratio": "1"},
		"database": {"connection": "mysql+pymysql://cinder:@@CINDER_DB_PASSWORD@@@mariadb.openstack.svc/cinder"},
	} {
		for k, v := range kv {
			if conf[s][k] != v {
				t.Errorf("cinder.conf [%s] %s = %q, want %q", s, k, conf[s][k], v)
			}
		}
	}
	if _, ok := conf["lvm"]; ok {
		t.Errorf("cinder.conf with ceph has an [lvm] section")
	}
	// os-brick's privsep daemon keeps no capability: the unprivileged cinder-backup has
	// none to keep (with the default CAP_SYS_ADMIN its privsep daemon cannot start).
	if caps, ok := conf["privsep_osbrick"]["capabilities"]; !ok || caps != "" {
		t.Errorf("cinder.conf [privsep_osbrick] capabilities = %q (set: %t), want set and empty", caps, ok)
	}
	if got := c.config.StringData["ceph.conf"]; got != "[global]\nmon_host = 10.0.0.5\n" {
		t.Errorf("cinder's ceph.conf = %q, want the monitor's address only", got)
	}
	// The volume type step comes after the registration; both after the db sync.
	var steps []string
	for _, s := range podContainers(c.job.Spec.Template.Spec) {
		steps = append(steps, s.Name)
	}
	if got := strings.Join(steps, ","); got != "config-render,db-create,db-sync,keystone-register,volume-type" {
		t.Errorf("cinder-init steps = %s", got)
	}
	reg := containerByName(c.job.Spec.Template.Spec.InitContainers, "keystone-register")
	for k, v := range map[string]string{"SVC_TYPE": "volumev3", "SVC_NAME": "cinderv3", "ENDPOINT_INTERNAL": "http://cinder-api.openstack.svc:8776/v3/%(project_id)s"} {
		if e := envByName(reg, k); e == nil || e.Value != v {
			t.Errorf("keystone-register %s = %+v, want %s", k, e, v)
		}
	}
	vt := containerByName(c.job.Spec.Template.Spec.Containers, "volume-type")
	for k, v := range map[string]string{"TYPE_NAME": "ceph", "BACKEND": "ceph", "TIMEOUT": "600"} {
		if e := envByName(vt, k); e == nil || e.Value != v {
			t.Errorf("volume-type %s = %+v, want %s", k, e, v)
		}
	}
	checkPlaceholders(t, vals, regexp.MustCompile(`(?i)password|secret|^key$`))
	checkCinderPlaceholders(t, c)
}

// checkCinderPlaceholders runs every pod's config-render over the config Secret and checks
// that the files the pod mounts keep no placeholder, and that it reads only Secrets osd makes.
func checkCinderPlaceholders(t *testing.T, c cinderObjects) {
	t.Helper()
	generated := map[string]map[string]deploy.KeyFormat{}
	for _, s := range deploy.DefaultSecrets() {
		generated[s.Name] = s.Keys
	}
	for name, pod := range c.pods() {
		for _, ct := range podContainers(pod) {
			for _, e := range ct.Env {
				if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil {
					if _, ok := generated[ref.SecretKeyRef.Name][ref.SecretKeyRef.Key]; !ok {
						t.Errorf("%s %s reads Secret %s key %s, which osd does not generate", name, ct.Name, ref.SecretKeyRef.Name, ref.SecretKeyRef.Key)
					}
				}
			}
		}
		render := containerByName(pod.InitContainers, "config-render")
		if render == nil {
			t.Errorf("%s has no config-render", name)
			continue
		}
		dir, _ := runConfigRender(t, render, c.config.StringData)
		for file := range mountsOf(pod.Containers[0]) {
			b, err := os.ReadFile(filepath.Join(dir, file))
			if err != nil {
				t.Fatal(err)
			}
			if m := placeholderRE.FindString(string(b)); m != "" {
				t.Errorf("%s: %s keeps %s after config-render", name, file, m)
			}
		}
	}
}

// TestCinderLVM: the lvm backend's volume service runs as root on the node with the volume
// group, with the host's devices and configfs, and exports over iSCSI at the node's address.
// Rendered only: this machine has no device-mapper and no iSCSI target (see docs/storage.md).
func TestCinderLVM(t *testing.T) {
	c, _ := renderCinder(t, cinderSpec("lvm", map[string]any{"lvm": map[string]any{"node": "node1"}}))
	if _, ok := c.deployments["backup"]; ok {
		t.Errorf("lvm renders cinder-backup; want none (backups go to Ceph only)")
	}
	v := c.deployments["volume"]
	if v == nil {
		t.Fatal("no cinder-volume")
	}
	pod := v.Spec.Template.Spec
	if sc := pod.SecurityContext; sc == nil || *sc.RunAsUser != 0 || !pod.HostNetwork || !*pod.Containers[0].SecurityContext.Privileged {
		t.Errorf("lvm cinder-volume securityContext %+v hostNetwork %v, want root, privileged, host network", sc, pod.HostNetwork)
	}
	if got, want := strings.Join(withoutMallocTrim(t, "lvm cinder-volume", pod.Containers[0].Command, 30), " "), serverCommand(t, "volume"); got != want {
		t.Errorf("lvm cinder-volume command = %.300s, want %.300s", got, want)
	}
	// api and scheduler share cinder-server's process; cinder-volume is apart on its node.
	if got, want := strings.Join(withoutMallocTrim(t, "lvm cinder-server", c.deployments["server"].Spec.Template.Spec.Containers[0].Command, 30), " "), serverCommand(t, "api,scheduler"); got != want {
		t.Errorf("lvm cinder-server command = %.300s, want %.300s", got, want)
	}
	if !reflect.DeepEqual(pod.NodeSelector, map[string]string{"kubernetes.io/hostname": "node1"}) {
		t.Errorf("lvm cinder-volume nodeSelector = %v, want the volume group's node", pod.NodeSelector)
	}
	hostPaths := map[string]bool{}
	for _, vol := range pod.Volumes {
		if vol.HostPath != nil {
			hostPaths[vol.HostPath.Path] = true
		}
	}
	for _, p := range []string{"/dev", "/run/lvm", "/sys/kernel/config", "/lib/modules", "/var/lib/cinder/volumes"} {
		if !hostPaths[p] {
			t.Errorf("lvm cinder-volume lacks host path %s (has %v)", p, hostPaths)
		}
	}
	if e := envByName(containerByName(pod.InitContainers, "config-render"), "MY_IP"); e == nil || e.ValueFrom.FieldRef.FieldPath != "status.hostIP" {
		t.Errorf("lvm config-render MY_IP = %+v, want status.hostIP", e)
	}
	conf, err := novaParseINI(c.config.StringData["cinder.conf"])
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"volume_driver": "cinder.volume.drivers.lvm.LVMVolumeDriver", "volume_group": "cinder-volumes",
		"target_helper": "lioadm", "target_protocol": "iscsi", "target_ip_address": "@@MY_IP@@", "volume_backend_name": "lvm"} {
		if conf["lvm"][k] != v {
			t.Errorf("cinder.conf [lvm] %s = %q, want %q", k, conf["lvm"][k], v)
		}
	}
	if conf["DEFAULT"]["enabled_backends"] != "lvm" || conf["DEFAULT"]["default_volume_type"] != "lvm" || conf["ceph"] != nil {
		t.Errorf("cinder.conf DEFAULT %v, ceph %v: want lvm enabled and default, no [ceph]", conf["DEFAULT"], conf["ceph"])
	}
	if _, ok := c.config.StringData["ceph.conf"]; ok {
		t.Errorf("lvm renders a ceph.conf")
	}
	if e := envByName(containerByName(c.job.Spec.Template.Spec.Containers, "volume-type"), "BACKEND"); e == nil || e.Value != "lvm" {
		t.Errorf("volume-type BACKEND = %+v, want lvm", e)
	}
	checkCinderPlaceholders(t, c)
	// Without a node: the storage label.
	c, _ = renderCinder(t, cinderSpec("lvm", nil))
	if got := c.deployments["volume"].Spec.Template.Spec.NodeSelector; !reflect.DeepEqual(got, map[string]string{"openstack-storage": "enabled"}) {
		t.Errorf("lvm cinder-volume without lvm.node: nodeSelector %v, want openstack-storage=enabled", got)
	}
}

// TestCinderRefuses: no backend, an unknown one, or Ceph without its monitor address fail the
// render with a message, rather than a cinder.conf that cannot work.
func TestCinderRefuses(t *testing.T) {
	for _, tt := range []struct {
		name string
		spec deploy.DeploymentSpec
		want string
	}{
		{name: "file", spec: cinderSpec("file", nil), want: `features.storage "file": cinder needs the ceph or lvm backend`},
		{name: "no monitor", spec: cinderSpec("ceph", map[string]any{"ceph": map[string]any{"monHost": ""}}), want: "ceph.monHost is not set"},
	} {
		if err := renderError("cinder", tt.spec); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("render cinder (%s) error = %v, want %q", tt.name, err, tt.want)
		}
	}
}
