package charts

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/osdcloud/osd/daemon/deploy"
	"github.com/osdcloud/osd/daemon/deploy/helmclient"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// cephObjects holds the ceph chart's objects decoded into the Kubernetes types.
type cephObjects struct {
	daemons map[string]*appsv1.Deployment // mon, mgr, osd
	setup   *batchv1.Job
	config  *corev1.Secret
}

func cephSpec(o map[string]any) deploy.DeploymentSpec {
	imgs := map[string]string{"ceph": "localhost/osd/ceph:test"}
	for k, v := range testImages {
		imgs[k] = v
	}
	return deploy.DeploymentSpec{Images: imgs, Features: deploy.Features{Storage: deploy.StorageCeph},
		Services: map[string]deploy.ServiceSpec{"ceph": {Overrides: o}}}
}

func renderCeph(t *testing.T, spec deploy.DeploymentSpec) (cephObjects, map[string]any) {
	t.Helper()
	svc, ok := deploy.DefaultCatalog().Service("ceph")
	if !ok {
		t.Fatal("catalog has no ceph")
	}
	objs, _ := render(t, FS, "ceph", svc, spec)
	ch, _, err := helmclient.LoadChart(FS, "ceph")
	if err != nil {
		t.Fatal(err)
	}
	vals, err := deploy.Render(spec, svc, ch.Values)
	if err != nil {
		t.Fatal(err)
	}
	c := cephObjects{daemons: map[string]*appsv1.Deployment{}}
	for _, o := range objs {
		switch v := decodeObject(t, o).(type) {
		case *appsv1.Deployment:
			c.daemons[strings.TrimPrefix(v.Name, "ceph-")] = v
		case *batchv1.Job:
			c.setup = v
		case *corev1.Secret:
			c.config = v
		default:
			t.Fatalf("ceph renders an unexpected %T %s", v, o.Metadata.Name)
		}
	}
	if len(c.daemons) != 3 || c.setup == nil || c.config == nil || !strings.HasPrefix(c.setup.Name, "ceph-setup-") {
		t.Fatalf("ceph objects = %v, want Deployments ceph-mon, ceph-mgr, ceph-osd, Job ceph-setup-<hash>, Secret ceph-config", kinds(objs))
	}
	return c, vals
}

func (c cephObjects) pods() map[string]corev1.PodSpec {
	out := map[string]corev1.PodSpec{"Job/ceph-setup": c.setup.Spec.Template.Spec}
	for n, d := range c.daemons {
		out["Deployment/ceph-"+n] = d.Spec.Template.Spec
	}
	return out
}

// TestCephRender checks the daemons' pods: host network on the one storage node, never two
// at once, the ceph user, the image, their host directories and the placeholders' sources.
func TestCephRender(t *testing.T) {
	c, _ := renderCeph(t, cephSpec(nil))
	if got := c.config.Name; got != "ceph-config" {
		t.Errorf("config Secret = %s, want ceph-config", got)
	}
	hostDirs := map[string][]string{
		"mon": {"/var/lib/osd/volumes/ceph/mon-a=/var/lib/ceph/mon/ceph-a"},
		"mgr": nil,
		"osd": {"/var/lib/osd/volumes/ceph/block=/var/lib/ceph/block", "/var/lib/osd/volumes/ceph/osd-0=/var/lib/ceph/osd/ceph-0"},
	}
	for name, d := range c.daemons {
		pod := d.Spec.Template.Spec
		if *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
			t.Errorf("ceph-%s replicas %d strategy %s, want 1 and Recreate", name, *d.Spec.Replicas, d.Spec.Strategy.Type)
		}
		if !pod.HostNetwork || !reflect.DeepEqual(pod.NodeSelector, map[string]string{"openstack-storage": "enabled"}) {
			t.Errorf("ceph-%s hostNetwork %v nodeSelector %v, want host network on openstack-storage=enabled", name, pod.HostNetwork, pod.NodeSelector)
		}
		if sc := pod.SecurityContext; sc == nil || *sc.RunAsUser != 64045 || *sc.FSGroup != 64045 || !*sc.RunAsNonRoot {
			t.Errorf("ceph-%s securityContext = %+v, want the ceph user 64045", name, sc)
		}
		var dirs []string
		for _, v := range pod.Volumes {
			if v.HostPath == nil {
				continue
			}
			for _, m := range pod.Containers[0].VolumeMounts {
				if m.Name == v.Name {
					dirs = append(dirs, v.HostPath.Path+"="+m.MountPath)
				}
			}
			if chown := containerByName(pod.InitContainers, "chown-"+v.Name); chown == nil || chown.SecurityContext == nil || *chown.SecurityContext.RunAsUser != 0 {
				t.Errorf("ceph-%s host dir %s has no root chown step", name, v.HostPath.Path)
			}
		}
		sort.Strings(dirs)
		if !reflect.DeepEqual(dirs, hostDirs[name]) {
			t.Errorf("ceph-%s host dirs = %v, want %v", name, dirs, hostDirs[name])
		}
		if e := envByName(&pod.Containers[0], "MY_IP"); e == nil || e.ValueFrom == nil || e.ValueFrom.FieldRef.FieldPath != "status.hostIP" {
			t.Errorf("ceph-%s MY_IP = %+v, want status.hostIP", name, e)
		}
	}
	for name, pod := range c.pods() {
		for _, ct := range podContainers(pod) {
			if ct.Image != "localhost/osd/ceph:test" || ct.ImagePullPolicy != corev1.PullNever {
				t.Errorf("%s container %s image %s pull %s, want the ceph image, Never", name, ct.Name, ct.Image, ct.ImagePullPolicy)
			}
		}
		if containerByName(pod.InitContainers, "config-render") == nil {
			t.Errorf("%s has no config-render step", name)
		}
	}
	if got := c.daemons["mon"].Spec.Template.Spec.Containers[0].ReadinessProbe; got == nil || got.TCPSocket == nil || got.TCPSocket.Port.IntValue() != 3300 {
		t.Errorf("ceph-mon readiness = %+v, want TCP 3300", got)
	}
	if got := c.daemons["osd"].Spec.Template.Spec.Containers[0]; got.ReadinessProbe == nil || got.LivenessProbe != nil ||
		!strings.Contains(strings.Join(got.ReadinessProbe.Exec.Command, " "), "ceph-osd.0.asok status") {
		t.Errorf("ceph-osd probes readiness %+v liveness %+v, want readiness on the admin socket's state only", got.ReadinessProbe, got.LivenessProbe)
	}

	// A node name pins every pod to that node.
	c, _ = renderCeph(t, cephSpec(map[string]any{"node": "node1"}))
	for name, pod := range c.pods() {
		if !reflect.DeepEqual(pod.NodeSelector, map[string]string{"kubernetes.io/hostname": "node1"}) {
			t.Errorf("%s with node node1: nodeSelector %v, want kubernetes.io/hostname node1", name, pod.NodeSelector)
		}
	}
}

// TestCephConfig checks ceph.conf for one node and the keyrings: placeholders only, each
// client with its documented capabilities, and every Secret reference generated by osd.
func TestCephConfig(t *testing.T) {
	c, vals := renderCeph(t, cephSpec(map[string]any{"osd": map[string]any{"blockSizeBytes": int64(21474836480)}}))
	files := c.config.StringData
	var names []string
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	if want := []string{"admin.keyring", "ceph.conf", "clients.keyring", "mgr.keyring", "mkfs.keyring"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("ceph-config files = %v, want %v", names, want)
	}
	conf, err := novaParseINI(files["ceph.conf"])
	if err != nil {
		t.Fatalf("ceph.conf: %v\n%s", err, files["ceph.conf"])
	}
	want := map[string]map[string]string{
		"global": {"fsid": "@@FSID@@", "mon_host": "@@MY_IP@@", "osd_pool_default_size": "1", "mon_allow_pool_size_one": "true",
			"osd_crush_chooseleaf_type": "0", "auth_allow_insecure_global_id_reclaim": "false", "mon_warn_on_pool_no_redundancy": "false",
			"log_to_file": "false", "log_to_stderr": "true"},
		"osd": {"bluestore_block_path": "/var/lib/ceph/block/$cluster-$id.img", "bluestore_block_create": "true",
			"bluestore_block_size": "21474836480", "osd_memory_target": "939524096"},
	}
	for s, kv := range want {
		for k, v := range kv {
			if conf[s][k] != v {
				t.Errorf("ceph.conf [%s] %s = %q, want %q", s, k, conf[s][k], v)
			}
		}
	}
	if p := conf["osd"]["bluestore_block_path"]; strings.HasPrefix(p, "/var/lib/ceph/osd/") {
		t.Errorf("bluestore_block_path %s is inside the OSD's directory (BlueStore links it to itself: ELOOP)", p)
	}
	// Pacific's always-on modules must stay loadable (one missing is MGR_MODULE_ERROR).
	disabled := strings.Split(conf["mgr"]["mgr_disabled_modules"], ",")
	for _, m := range []string{"balancer", "crash", "devicehealth", "orchestrator", "pg_autoscaler", "progress", "rbd_support", "status", "telemetry", "volumes"} {
		if slices.Contains(disabled, m) {
			t.Errorf("mgr_disabled_modules has the always-on module %s", m)
		}
	}
	if !slices.Contains(disabled, "dashboard") || !slices.Contains(disabled, "restful") {
		t.Errorf("mgr_disabled_modules = %v, want dashboard and restful among them", disabled)
	}
	osd := c.daemons["osd"].Spec.Template.Spec.Containers[0].Command[2]
	if !strings.Contains(osd, "want=21474836480\n") || !strings.Contains(osd, "ceph-bluestore-tool bluefs-bdev-expand") || !strings.Contains(osd, "block=/var/lib/ceph/block/ceph-0.img") {
		t.Errorf("ceph-osd script lacks the size, the growth or the block path of [osd]:\n%s", osd)
	}

	clients, err := novaParseINI(files["clients.keyring"])
	if err != nil {
		t.Fatal(err)
	}
	for name, caps := range map[string]map[string]string{
		"glance":        {"osd": `"profile rbd pool=images"`},
		"cinder":        {"osd": `"profile rbd pool=volumes, profile rbd pool=vms, profile rbd-read-only pool=images"`, "mon": `"profile rbd"`},
		"cinder-backup": {"osd": `"profile rbd pool=backups"`},
	} {
		e := clients["client."+name]
		if e["key"] != "@@CLIENT_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))+"_KEY@@" {
			t.Errorf("client.%s key = %q, want its placeholder", name, e["key"])
		}
		for svc, v := range caps {
			if e["caps "+svc] != v {
				t.Errorf("client.%s caps %s = %s, want %s", name, svc, e["caps "+svc], v)
			}
		}
	}
	if len(clients) != 3 {
		t.Errorf("clients.keyring has %d users, want glance, cinder, cinder-backup", len(clients))
	}
	mkfs, _ := novaParseINI(files["mkfs.keyring"])
	if mkfs["mon."]["caps mon"] != `"allow *"` || mkfs["mgr.x"]["caps mon"] != `"allow profile mgr"` || mkfs["client.admin"]["key"] != "@@ADMIN_KEY@@" {
		t.Errorf("mkfs.keyring = %v, want mon., client.admin and mgr.x with their capabilities", mkfs)
	}
	checkPlaceholders(t, vals, regexp.MustCompile(`(?i)password|secret|^key$`))

	// Every Secret a pod reads is one osd generates, with that key.
	generated := map[string]map[string]deploy.KeyFormat{}
	for _, s := range deploy.DefaultSecrets() {
		generated[s.Name] = s.Keys
	}
	for name, pod := range c.pods() {
		for _, ct := range podContainers(pod) {
			for _, e := range ct.Env {
				if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
					continue
				}
				ref := e.ValueFrom.SecretKeyRef
				if _, ok := generated[ref.Name][ref.Key]; !ok {
					t.Errorf("%s %s reads Secret %s key %s, which osd does not generate", name, ct.Name, ref.Name, ref.Key)
				}
			}
		}
	}

	// config-render resolves every placeholder a pod's files use from what the pod gets.
	for name, pod := range c.pods() {
		render := containerByName(pod.InitContainers, "config-render")
		dir, _ := runConfigRender(t, render, files)
		used := map[string]string{
			"Deployment/ceph-mon": "ceph.conf admin.keyring mkfs.keyring", "Deployment/ceph-mgr": "ceph.conf mgr.keyring",
			"Deployment/ceph-osd": "ceph.conf admin.keyring", "Job/ceph-setup": "ceph.conf admin.keyring clients.keyring",
		}[name]
		for _, f := range strings.Fields(used) {
			b, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			if m := placeholderRE.FindString(string(b)); m != "" {
				t.Errorf("%s: %s keeps %s after config-render", name, f, m)
			}
		}
	}
}

// TestCephSetupJob checks the pools the Job makes and that it waits for them.
func TestCephSetupJob(t *testing.T) {
	c, _ := renderCeph(t, cephSpec(nil))
	steps := podContainers(c.setup.Spec.Template.Spec)
	if len(steps) != 2 || steps[0].Name != "config-render" || steps[1].Name != "setup" {
		t.Fatalf("ceph-setup steps = %d, want config-render then setup", len(steps))
	}
	script := steps[1].Command[2]
	for _, want := range []string{
		"ceph auth import -i /etc/ceph/clients.keyring",
		"ceph osd pool create volumes 32 32 replicated\nceph osd pool set volumes size 1 --yes-i-really-mean-it\nceph osd pool set volumes pg_autoscale_mode off",
		"ceph osd pool create images 16 16 replicated", "ceph osd pool create vms 16 16 replicated", "ceph osd pool create backups 16 16 replicated",
		"rbd pool init volumes", "rbd pool init backups", "active\\+clean;",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("ceph-setup script lacks %q:\n%s", want, script)
		}
	}
	if !reflect.DeepEqual(c.setup.Spec.Template.Spec.NodeSelector, map[string]string{"openstack-storage": "enabled"}) {
		t.Errorf("ceph-setup nodeSelector = %v, want the storage node's", c.setup.Spec.Template.Spec.NodeSelector)
	}
	// Another pool list is another Job.
	c2, _ := renderCeph(t, cephSpec(map[string]any{"poolSize": 2}))
	if c2.setup.Name == c.setup.Name || !strings.Contains(podContainers(c2.setup.Spec.Template.Spec)[1].Command[2], "size 2 --yes") {
		t.Errorf("ceph-setup with poolSize 2 = %s, want a new Job setting size 2", c2.setup.Name)
	}
}
