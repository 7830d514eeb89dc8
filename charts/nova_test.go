package charts

import (
	"archive/tar"
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/deploy"
	"github.com/osdcloud/osd/daemon/deploy/helmclient"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// novaFS serves the nova chart: charts.FS once it embeds nova, else this directory (the
// same files; the chart refers to ../osd-lib, which is here too).
func novaFS() fs.FS {
	if _, err := fs.Stat(FS, "nova/Chart.yaml"); err == nil {
		return FS
	}
	return os.DirFS(".")
}

// novaObjects holds the nova chart's objects decoded into the Kubernetes types.
type novaObjects struct {
	deployments map[string]*appsv1.Deployment
	compute     *appsv1.DaemonSet
	job         *batchv1.Job // nova-init
	cellSetup   *batchv1.Job // nova-cell-setup
	services    map[string]*corev1.Service
	secrets     map[string]*corev1.Secret
}

func novaService(t *testing.T) deploy.Service {
	t.Helper()
	svc, ok := deploy.DefaultCatalog().Service("nova")
	if !ok {
		t.Fatal("catalog has no nova")
	}
	return svc
}

// renderNova renders the chart as the controller does and returns its typed objects, the
// manifests and the layered values.
func renderNova(t *testing.T, spec deploy.DeploymentSpec) (novaObjects, string, map[string]any) {
	t.Helper()
	svc := novaService(t)
	objs, out := render(t, novaFS(), "nova", svc, spec)
	ch, _, err := helmclient.LoadChart(novaFS(), "nova")
	if err != nil {
		t.Fatal(err)
	}
	vals, err := deploy.Render(spec, svc, ch.Values)
	if err != nil {
		t.Fatal(err)
	}
	n := novaObjects{deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{}, secrets: map[string]*corev1.Secret{}}
	for _, o := range objs {
		obj := decodeObject(t, o)
		switch v := obj.(type) {
		case *appsv1.Deployment:
			n.deployments[v.Name] = v
		case *appsv1.DaemonSet:
			n.compute = v
		case *batchv1.Job:
			if strings.HasPrefix(v.Name, "nova-cell-setup-") {
				n.cellSetup = v
			} else {
				n.job = v
			}
		case *corev1.Service:
			n.services[v.Name] = v
		case *corev1.Secret:
			n.secrets[v.Name] = v
		default:
			t.Fatalf("nova renders an unexpected %T %s", obj, o.Metadata.Name)
		}
	}
	if n.compute == nil || n.job == nil || n.cellSetup == nil {
		t.Fatalf("nova objects = %v, want a DaemonSet and the Jobs nova-init and nova-cell-setup", kinds(objs))
	}
	return n, out, vals
}

func novaOverrides(o map[string]any) deploy.DeploymentSpec {
	return deploy.DeploymentSpec{Images: testImages, Services: map[string]deploy.ServiceSpec{"nova": {Overrides: o}}}
}

// pods returns every pod template of the chart by workload.
func (n novaObjects) pods() map[string]corev1.PodSpec {
	out := map[string]corev1.PodSpec{"DaemonSet/nova-compute": n.compute.Spec.Template.Spec, "Job/" + n.job.Name: n.job.Spec.Template.Spec,
		"Job/" + n.cellSetup.Name: n.cellSetup.Spec.Template.Spec}
	for name, d := range n.deployments {
		out["Deployment/"+name] = d.Spec.Template.Spec
	}
	return out
}

// novaParseINI reads an INI file the way oslo.config would see it: sections, "key = value"
// lines; a key outside a section, a repeated key or a malformed line is an error.
func novaParseINI(s string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(s))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			if _, dup := out[section]; dup {
				return nil, fmt.Errorf("line %d: section %s repeated", n, section)
			}
			out[section] = map[string]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if !ok || k == "" || section == "" {
				return nil, fmt.Errorf("line %d: %q is not key = value in a section", n, line)
			}
			if _, dup := out[section][k]; dup {
				return nil, fmt.Errorf("line %d: %s.%s repeated", n, section, k)
			}
			out[section][k] = v
		}
	}
	return out, sc.Err()
}

func TestNovaRender(t *testing.T) {
	n, out, _ := renderNova(t, deploy.DeploymentSpec{Images: testImages})
	var got []string
	for name := range n.deployments {
		got = append(got, "Deployment/"+name)
	}
	for name := range n.services {
		got = append(got, "Service/"+name)
	}
	for name := range n.secrets {
		got = append(got, "Secret/"+name)
	}
	slices.Sort(got)
	want := []string{"Deployment/nova-server",
		"Secret/nova-compute-config", "Secret/nova-config", "Service/nova-api", "Service/nova-metadata", "Service/nova-novncproxy"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("nova objects = %v, want %v plus DaemonSet/nova-compute and the Jobs", got, want)
	}
	if !strings.HasPrefix(n.job.Name, "nova-init-") || strings.Count(out, "\nkind: Job") != 2 {
		t.Errorf("Jobs %s and %s, want nova-init-<hash> and nova-cell-setup-<hash> only", n.job.Name, n.cellSetup.Name)
	}
	// The cell setup maps registered compute hosts and waits for one (the first server
	// would otherwise find "No valid host" until the scheduler's periodic mapping).
	// It waits for the databases first, in one cheap process, not in nova-manage calls.
	// The discovery polls in one process (files/cell-setup.py) for up to
	// cellSetup.timeoutSeconds (900).
	if steps := podContainers(n.cellSetup.Spec.Template.Spec); len(steps) != 3 || steps[1].Name != "wait-db" || steps[2].Name != "discover-hosts" {
		t.Errorf("nova-cell-setup steps = %+v, want config-render, wait-db, then discover-hosts", steps)
	} else {
		checkWaitDB(t, "Job/nova-cell-setup", steps[1])
		checkPythonCommand(t, steps[2].Command, "host_mapping.discover_hosts(ctxt", `m.cell_mapping.name == "cell1"`, "900 --config-file /etc/nova/nova.conf")
	}

	for name, pod := range n.pods() {
		compute := name == "DaemonSet/nova-compute"
		sc := pod.SecurityContext
		switch {
		case compute && (sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 0):
			t.Errorf("%s securityContext = %+v, want root", name, sc)
		case !compute && (sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 64060 || sc.FSGroup == nil || *sc.FSGroup != 64060 || !*sc.RunAsNonRoot):
			t.Errorf("%s securityContext = %+v, want the nova user 64060, non-root", name, sc)
		}
		image := testImages["openstack"]
		if compute {
			image = testImages["compute"]
		}
		for _, c := range podContainers(pod) {
			if c.ImagePullPolicy != corev1.PullNever || c.Image != image {
				t.Errorf("%s container %s = %s pull %s, want %s Never", name, c.Name, c.Image, c.ImagePullPolicy, image)
			}
		}
		if strings.HasPrefix(name, "Job/") {
			continue
		}
		// The long-running container: small requests and a memory limit (nova-server: the
		// CPU share of the four services it runs, 130m).
		c := pod.Containers[0]
		cpu, mem := c.Resources.Requests.Cpu(), c.Resources.Requests.Memory()
		maxCPU := "50m"
		if name == "Deployment/nova-server" {
			maxCPU = "130m"
		}
		if cpu.Cmp(resource.MustParse("20m")) < 0 || cpu.Cmp(resource.MustParse(maxCPU)) > 0 ||
			mem.Cmp(resource.MustParse("100Mi")) < 0 || mem.Cmp(resource.MustParse("200Mi")) > 0 {
			t.Errorf("%s requests cpu %s memory %s, want 20-%s and 100-200Mi", name, cpu, mem, maxCPU)
		}
		if lim := c.Resources.Limits.Memory(); lim.IsZero() || lim.Cmp(*mem) <= 0 {
			t.Errorf("%s memory limit = %s, want one above the request %s", name, lim, mem)
		}
		var inits []string
		for _, c := range pod.InitContainers {
			inits = append(inits, c.Name)
		}
		wantInits := []string{"config-render", "wait-db"} // the control plane waits for the Job's db syncs
		if compute {
			// instances_path must exist before nova-compute starts; it registers through the conductor.
			wantInits = []string{"config-render", "state-dirs", "wait-conductor"}
		}
		if len(pod.Containers) != 1 || !reflect.DeepEqual(inits, wantInits) {
			t.Errorf("%s init containers %v and %d containers, want %v then one", name, inits, len(pod.Containers), wantInits)
		}
		if w := containerByName(pod.InitContainers, "wait-db"); w != nil {
			checkWaitDB(t, name, *w)
		}
	}
}

// TestNovaDeployments checks commands, ports, probes and Services of the control plane.
func TestNovaDeployments(t *testing.T) {
	n, _, _ := renderNova(t, deploy.DeploymentSpec{Images: testImages})
	tests := []struct {
		name    string
		command []string
		ports   []int32
		probe   string   // "" none, "GET /:8774", "tcp:6080"
		program []string // python3 -c: what the program (command[2], left "" in command) says
	}{
		// api (osapi_compute and metadata), conductor and scheduler in one process, the noVNC
		// proxy started by it on a console connection (files/nova-server.py).
		{name: "nova-server", command: []string{"/usr/bin/python3", "-c", "", "api,conductor,scheduler,novncproxy", "--config-file", "/etc/nova/nova.conf"}, ports: []int32{8774, 8775, 6080}, probe: "GET /:8774",
			program: []string{"import nova.cmd.api", "oslo_service.ServiceLauncher(CONF", `binary="nova-conductor"`, `binary="nova-scheduler"`, "service.WSGIService(api", "novncproxy.main()", "kwargs.update(listen_fd=fd, idle_timeout=NOVNC_IDLE_EXIT)", "pass_fds=[sock.fileno()]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := n.deployments[tt.name]
			if d == nil {
				t.Fatalf("no Deployment %s", tt.name)
			}
			if *d.Spec.Replicas != 1 {
				t.Errorf("%s replicas = %d, want 1", tt.name, *d.Spec.Replicas)
			}
			c := containerByName(d.Spec.Template.Spec.Containers, tt.name)
			if c == nil {
				t.Fatalf("%s has no container %s", tt.name, tt.name)
			}
			command := append([]string(nil), c.Command...)
			if tt.program != nil && len(command) > 2 {
				for _, want := range tt.program {
					if !strings.Contains(command[2], want) {
						t.Errorf("%s program:\n%s\nwant it to say %q", tt.name, command[2], want)
					}
				}
				command[2] = ""
			}
			if !reflect.DeepEqual(command, tt.command) {
				t.Errorf("%s command = %q, want %q", tt.name, c.Command, tt.command)
			}
			var ports []int32
			for _, p := range c.Ports {
				ports = append(ports, p.ContainerPort)
			}
			if !reflect.DeepEqual(ports, tt.ports) {
				t.Errorf("%s ports = %v, want %v", tt.name, ports, tt.ports)
			}
			for kind, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
				got := ""
				switch {
				case p == nil:
				case p.HTTPGet != nil:
					got = fmt.Sprintf("GET %s:%d", p.HTTPGet.Path, p.HTTPGet.Port.IntValue())
				case p.TCPSocket != nil:
					got = fmt.Sprintf("tcp:%d", p.TCPSocket.Port.IntValue())
				default:
					got = "other"
				}
				if got != tt.probe {
					t.Errorf("%s %s probe = %q, want %q", tt.name, kind, got, tt.probe)
				}
			}
			var mounted bool
			for _, m := range c.VolumeMounts {
				mounted = mounted || (m.Name == "config" && m.SubPath == "nova.conf" && m.MountPath == "/etc/nova/nova.conf" && m.ReadOnly)
			}
			if !mounted {
				t.Errorf("%s mounts %v, want nova.conf at /etc/nova/nova.conf", tt.name, c.VolumeMounts)
			}
			if d.Spec.Template.Annotations["checksum/config"] != n.job.Spec.Template.Annotations["checksum/config"] {
				t.Errorf("%s and the Job have different config checksums", tt.name)
			}
			if v := d.Spec.Template.Spec.Volumes[0]; v.Secret == nil || v.Secret.SecretName != "nova-config" {
				t.Errorf("%s config templates = %+v, want Secret nova-config", tt.name, v.VolumeSource)
			}
		})
	}

	services := []struct {
		name, component string
		port, nodePort  int32
		typ             corev1.ServiceType
	}{
		{name: "nova-api", component: "server", port: 8774, nodePort: 30774, typ: corev1.ServiceTypeNodePort},
		{name: "nova-metadata", component: "server", port: 8775, typ: corev1.ServiceTypeClusterIP},
		{name: "nova-novncproxy", component: "server", port: 6080, nodePort: 30680, typ: corev1.ServiceTypeNodePort},
	}
	for _, tt := range services {
		s := n.services[tt.name]
		if s == nil || len(s.Spec.Ports) != 1 {
			t.Errorf("Service %s = %+v, want one port", tt.name, s)
			continue
		}
		p := s.Spec.Ports[0]
		if s.Spec.Type != tt.typ || p.Port != tt.port || p.TargetPort.IntValue() != int(tt.port) || p.NodePort != tt.nodePort {
			t.Errorf("Service %s = %s %d -> %s nodePort %d, want %s %d -> %d nodePort %d", tt.name, s.Spec.Type, p.Port, p.TargetPort.String(), p.NodePort, tt.typ, tt.port, tt.port, tt.nodePort)
		}
		d := n.deployments["nova-"+tt.component]
		if !reflect.DeepEqual(s.Spec.Selector, d.Spec.Selector.MatchLabels) {
			t.Errorf("Service %s selector %v, want Deployment %s's %v", tt.name, s.Spec.Selector, d.Name, d.Spec.Selector.MatchLabels)
		}
	}
}

// TestNovaComputeDaemonSet checks the compute pod's placement on labelled nodes, its host
// access and that every host directory is mounted at its own path (the host's libvirt
// opens the files nova-compute writes).
func TestNovaComputeDaemonSet(t *testing.T) {
	n, _, _ := renderNova(t, deploy.DeploymentSpec{Images: testImages})
	ds := n.compute
	pod := ds.Spec.Template.Spec
	if ds.Name != "nova-compute" || !reflect.DeepEqual(pod.NodeSelector, map[string]string{"node-restriction.kubernetes.io/openstack-compute-node": "enabled"}) {
		t.Errorf("DaemonSet %s nodeSelector = %v, want nova-compute on openstack-compute-node=enabled", ds.Name, pod.NodeSelector)
	}
	if !pod.HostNetwork || pod.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("hostNetwork %v dnsPolicy %s, want true, ClusterFirstWithHostNet", pod.HostNetwork, pod.DNSPolicy)
	}
	c := containerByName(pod.Containers, "nova-compute")
	if c == nil {
		t.Fatalf("containers = %v, want nova-compute", pod.Containers)
	}
	checkPythonCommand(t, c.Command, "from nova.cmd.compute import main", `PRLIMIT = "/usr/bin/prlimit"`, "--config-file /etc/nova/nova.conf")
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Errorf("nova-compute securityContext = %+v, want privileged", c.SecurityContext)
	}
	if p := c.ReadinessProbe; p == nil || p.Exec == nil || strings.Join(p.Exec.Command, " ") != "test -S /run/libvirt/libvirt-sock" {
		t.Errorf("nova-compute readiness probe = %+v, want an exec probe for the host's libvirt socket", p)
	}
	if len(c.Ports) != 0 || c.LivenessProbe != nil {
		t.Errorf("nova-compute ports %v liveness %+v, want none", c.Ports, c.LivenessProbe)
	}
	checkWaitConductor(t, pod)

	hostPaths := map[string]string{} // volume -> host path
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	mounts := map[string]corev1.VolumeMount{} // host path -> mount
	for _, m := range c.VolumeMounts {
		if hp, ok := hostPaths[m.Name]; ok {
			if m.MountPath != hp {
				t.Errorf("hostPath %s mounted at %s, want the same path", hp, m.MountPath)
			}
			mounts[hp] = m
		}
	}
	for path, ro := range map[string]bool{"/run/libvirt": false, "/var/lib/nova": false, "/var/lib/libvirt": false, "/run/openvswitch": false, "/lib/modules": true, "/dev": false} {
		if m, ok := mounts[path]; !ok || m.ReadOnly != ro {
			t.Errorf("nova-compute mounts %v, want host %s (readOnly %v)", c.VolumeMounts, path, ro)
		}
	}

	// The files the config names live on those mounts.
	conf, err := novaParseINI(n.secrets["nova-compute-config"].StringData["nova.conf"])
	if err != nil {
		t.Fatalf("compute nova.conf: %v", err)
	}
	under := func(p string) bool {
		for m := range mounts {
			if strings.HasPrefix(p, m+"/") {
				return true
			}
		}
		return false
	}
	for _, p := range []string{conf["DEFAULT"]["instances_path"], conf["DEFAULT"]["state_path"] + "/x", "/run/libvirt/libvirt-sock", strings.TrimPrefix(conf["os_vif_ovs"]["ovsdb_connection"], "unix:")} {
		if !under(p) {
			t.Errorf("%s is not on a host mount %v", p, mounts)
		}
	}
	if conf["DEFAULT"]["instances_path"] != "/var/lib/nova/instances" || conf["libvirt"]["connection_uri"] != "qemu:///system" {
		t.Errorf("instances_path %q connection_uri %q, want /var/lib/nova/instances, qemu:///system", conf["DEFAULT"]["instances_path"], conf["libvirt"]["connection_uri"])
	}

	// nova-compute is root: its privsep daemons start without sudo and nova-rootwrap,
	// privsep-helper reading the same nova.conf.
	for _, section := range []string{"nova_sys_admin", "vif_plug_ovs_privileged", "privsep_osbrick"} {
		if got := conf[section]["helper_command"]; got != "privsep-helper --config-file /etc/nova/nova.conf" {
			t.Errorf("compute nova.conf [%s] helper_command = %q, want privsep-helper --config-file /etc/nova/nova.conf", section, got)
		}
	}

	// host and my_ip come from the downward API through config-render.
	render := containerByName(pod.InitContainers, "config-render")
	for name, field := range map[string]string{"MY_IP": "status.hostIP", "NODE_NAME": "spec.nodeName"} {
		e := envByName(render, name)
		if e == nil || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != field {
			t.Errorf("compute config-render env %s = %+v, want fieldRef %s", name, e, field)
		}
	}
	if conf["DEFAULT"]["host"] != "@@NODE_NAME@@" || conf["DEFAULT"]["my_ip"] != "@@MY_IP@@" || conf["vnc"]["server_proxyclient_address"] != "$my_ip" {
		t.Errorf("compute DEFAULT host %q my_ip %q vnc proxyclient %q, want @@NODE_NAME@@, @@MY_IP@@, $my_ip", conf["DEFAULT"]["host"], conf["DEFAULT"]["my_ip"], conf["vnc"]["server_proxyclient_address"])
	}
	if v := pod.Volumes[0]; v.Secret == nil || v.Secret.SecretName != "nova-compute-config" {
		t.Errorf("compute config templates = %+v, want Secret nova-compute-config", v.VolumeSource)
	}
}

// checkWaitDB checks a wait-db step: one Python process (compiling) that reads both
// databases' alembic revision every 2 s against the image's heads, with a bound, and never
// prints a connection URL (it holds the password). A shell loop starting an interpreter
// per check kept the CPU busy while the nova-init Job ran.
func checkWaitDB(t *testing.T, where string, w corev1.Container) {
	t.Helper()
	if len(w.Command) != 3 || w.Command[0] != "python3" || w.Command[1] != "-c" {
		t.Errorf("%s wait-db command = %q, want python3 -c <program>", where, w.Command)
		return
	}
	program := w.Command[2]
	for _, want := range []string{"for db in (\"api\", \"main\")", "migration._find_alembic_conf(db)", "get_current_head()",
		"MigrationContext.configure(conn).get_current_revision()", "poolclass=sqlalchemy.pool.NullPool", "time.sleep(2)",
		"if waited > 1800", "waiting for the nova-init Job", `getattr(e, "orig", None) or type(e).__name__`} {
		if !strings.Contains(program, want) {
			t.Errorf("%s wait-db program lacks %q:\n%s", where, want, program)
		}
	}
	if strings.Contains(program, "print(urls") || strings.Contains(program, "% urls") {
		t.Errorf("%s wait-db prints a connection URL:\n%s", where, program)
	}
	cmd := exec.Command("python3", "-c", "import sys; compile(sys.stdin.read(), 'wait-db', 'exec')")
	cmd.Stdin = strings.NewReader(program)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("%s wait-db's Python does not compile: %v\n%s", where, err, out)
	}
	var mounted bool
	for _, m := range w.VolumeMounts {
		mounted = mounted || (m.Name == "config" && m.MountPath == "/etc/nova/nova.conf" && m.SubPath == "nova.conf")
	}
	if !mounted {
		t.Errorf("%s wait-db mounts %v, want the rendered nova.conf", where, w.VolumeMounts)
	}
}

// checkWaitConductor checks nova-compute's last init step: nova's own conductor ping over
// RabbitMQ with a short timeout, retried, with the compute config mounted, in Python that
// compiles. Without it nova-compute, started long before the conductor, loses up to a
// minute in its own wait (a lost ping waits rpc_response_timeout).
func checkWaitConductor(t *testing.T, pod corev1.PodSpec) {
	t.Helper()
	var names []string
	for _, c := range pod.InitContainers {
		names = append(names, c.Name)
	}
	n := len(names)
	if n == 0 || names[n-1] != "wait-conductor" {
		t.Fatalf("nova-compute init containers = %v, want wait-conductor last", names)
	}
	w := pod.InitContainers[n-1]
	if len(w.Command) != 3 || w.Command[0] != "python3" || w.Command[1] != "-c" {
		t.Fatalf("wait-conductor command = %q, want python3 -c <program>", w.Command)
	}
	program := w.Command[2]
	for _, want := range []string{`"--config-file", "/etc/nova/nova.conf"`, "configure_db=False", "baserpc.BaseAPI(topic=rpcapi.RPC_TOPIC)",
		"timeout=5", "except oslo_messaging.MessagingTimeout", "if waited > 1800", "sys.exit("} {
		if !strings.Contains(program, want) {
			t.Errorf("wait-conductor program lacks %q:\n%s", want, program)
		}
	}
	cmd := exec.Command("python3", "-c", "import sys; compile(sys.stdin.read(), 'wait-conductor', 'exec')")
	cmd.Stdin = strings.NewReader(program)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("wait-conductor's Python does not compile: %v\n%s", err, out)
	}
	var mounted bool
	for _, m := range w.VolumeMounts {
		mounted = mounted || (m.Name == "config" && m.MountPath == "/etc/nova/nova.conf" && m.SubPath == "nova.conf")
	}
	if !mounted {
		t.Errorf("wait-conductor mounts %v, want the rendered nova.conf", w.VolumeMounts)
	}
	if v := pod.Volumes[0]; v.Secret == nil || v.Secret.SecretName != "nova-compute-config" {
		t.Errorf("wait-conductor reads %+v, want nova-compute's config (Secret nova-compute-config)", v.VolumeSource)
	}
}

// TestNovaVirtType checks [libvirt] virt_type and cpu_mode per virtType, that only the
// compute config and pods change with it, and that an unknown type is refused.
func TestNovaVirtType(t *testing.T) {
	base, _, _ := renderNova(t, deploy.DeploymentSpec{Images: testImages})
	tests := []struct {
		virtType string
		cpuMode  string // "" = unset (Nova's default: host-model on KVM)
	}{
		{virtType: "qemu", cpuMode: "none"},
		{virtType: "kvm", cpuMode: ""},
	}
	for _, tt := range tests {
		t.Run(tt.virtType, func(t *testing.T) {
			n, _, _ := renderNova(t, novaOverrides(map[string]any{"virtType": tt.virtType}))
			conf, err := novaParseINI(n.secrets["nova-compute-config"].StringData["nova.conf"])
			if err != nil {
				t.Fatal(err)
			}
			mode, set := conf["libvirt"]["cpu_mode"]
			if conf["libvirt"]["virt_type"] != tt.virtType || mode != tt.cpuMode || set != (tt.cpuMode != "") {
				t.Errorf("virtType %s: [libvirt] virt_type = %q cpu_mode = %q (set %v), want %s, %q", tt.virtType, conf["libvirt"]["virt_type"], mode, set, tt.virtType, tt.cpuMode)
			}
			if n.secrets["nova-config"].StringData["nova.conf"] != base.secrets["nova-config"].StringData["nova.conf"] || n.job.Name != base.job.Name {
				t.Errorf("virtType %s changed the control plane's config or Job", tt.virtType)
			}
			sum := func(ds *appsv1.DaemonSet) string { return ds.Spec.Template.Annotations["checksum/config"] }
			if changed := sum(n.compute) != sum(base.compute); changed != (tt.virtType != "qemu") {
				t.Errorf("virtType %s: compute checksum changed = %v, want %v", tt.virtType, changed, tt.virtType != "qemu")
			}
		})
	}

	// An unknown virtType fails the render (Helm's error, not a broken nova.conf).
	ch, _, err := helmclient.LoadChart(novaFS(), "nova")
	if err != nil {
		t.Fatal(err)
	}
	svc := novaService(t)
	vals, err := deploy.Render(novaOverrides(map[string]any{"virtType": "xen"}), svc, ch.Values)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := helmclient.Template(context.Background(), ch, svc.Namespace, svc.Name, deploy.HelmValues(vals, ch.Values)); err == nil || !strings.Contains(err.Error(), `virtType "xen"`) {
		t.Errorf("Template(virtType xen) error = %v, want virtType \"xen\" refused", err)
	}
}

// TestNovaConfig checks both nova.conf files: each is deploy.RenderINI of its merged value
// layers, parses as INI, and carries the keys the services need.
func TestNovaConfig(t *testing.T) {
	n, _, vals := renderNova(t, deploy.DeploymentSpec{Images: testImages})
	conf := vals["conf"].(map[string]any)
	layer := func(k string) map[string]any { return conf[k].(map[string]any) }
	libvirt := map[string]any{"libvirt": map[string]any{"virt_type": "qemu", "cpu_mode": "none"}}
	files := map[string]map[string]any{
		"nova-config":         deploy.Merge(layer("nova"), layer("controlPlane")),
		"nova-compute-config": deploy.Merge(layer("nova"), libvirt, layer("compute")),
	}
	const ks = "http://keystone-api.openstack.svc:5000/v3"
	auth := map[string]string{"auth_type": "password", "auth_url": ks, "username": "nova", "password": "@@NOVA_KEYSTONE_PASSWORD@@",
		"project_name": "service", "user_domain_name": "Default", "project_domain_name": "Default"}
	common := map[string]map[string]string{
		"DEFAULT":      {"transport_url": "rabbit://nova:@@NOVA_RABBITMQ_PASSWORD@@@rabbitmq.openstack.svc:5672/nova", "state_path": "/var/lib/nova"},
		"placement":    {"region_name": "RegionOne", "valid_interfaces": "internal"},
		"neutron":      {"region_name": "RegionOne", "valid_interfaces": "internal"},
		"glance":       {"valid_interfaces": "internal"},
		"service_user": {"send_service_user_token": "true"},
		"vnc":          {"enabled": "true", "novncproxy_base_url": "http://127.0.0.1:30680/vnc_lite.html"},
	}
	for _, s := range []string{"placement", "neutron", "service_user"} {
		for k, v := range auth {
			common[s][k] = v
		}
	}
	want := map[string]map[string]map[string]string{
		"nova-config": {
			"DEFAULT": {"enabled_apis": "osapi_compute,metadata", "osapi_compute_listen_port": "8774", "osapi_compute_workers": "1",
				"metadata_listen_port": "8775", "metadata_workers": "1", "web": "/usr/share/novnc"},
			"api_database":       {"connection": "mysql+pymysql://nova:@@NOVA_DB_PASSWORD@@@mariadb.openstack.svc/nova_api"},
			"database":           {"connection": "mysql+pymysql://nova:@@NOVA_DB_PASSWORD@@@mariadb.openstack.svc/nova"},
			"conductor":          {"workers": "1"},
			"scheduler":          {"workers": "1", "discover_hosts_in_cells_interval": "10"},
			"neutron":            {"service_metadata_proxy": "true", "metadata_proxy_shared_secret": "@@METADATA_SECRET@@"},
			"keystone_authtoken": {"auth_url": ks, "username": "nova", "password": "@@NOVA_KEYSTONE_PASSWORD@@", "memcached_servers": "memcached:11211"},
			"vnc":                {"novncproxy_host": "0.0.0.0", "novncproxy_port": "6080"},
		},
		"nova-compute-config": {
			"DEFAULT": {"compute_driver": "libvirt.LibvirtDriver", "reserved_host_memory_mb": "512", "cpu_allocation_ratio": "4",
				"ram_allocation_ratio": "1.5", "instances_path": "/var/lib/nova/instances"},
			"libvirt":    {"virt_type": "qemu", "cpu_mode": "none", "images_type": "default", "connection_uri": "qemu:///system"},
			"vnc":        {"server_listen": "$my_ip", "server_proxyclient_address": "$my_ip"},
			"os_vif_ovs": {"ovsdb_connection": "unix:/run/openvswitch/db.sock"},
		},
	}
	for secret, layers := range files {
		t.Run(secret, func(t *testing.T) {
			s := n.secrets[secret]
			if s == nil || len(s.StringData) != 1 {
				t.Fatalf("Secret %s = %+v, want one file nova.conf", secret, s)
			}
			got := s.StringData["nova.conf"]
			rendered, err := deploy.RenderINI(sections(t, layers))
			if err != nil {
				t.Fatal(err)
			}
			if got != rendered {
				t.Errorf("%s nova.conf =\n%s\nwant (deploy.RenderINI of the merged layers)\n%s", secret, got, rendered)
			}
			ini, err := novaParseINI(got)
			if err != nil {
				t.Fatalf("%s nova.conf does not parse: %v", secret, err)
			}
			for _, keys := range []map[string]map[string]string{common, want[secret]} {
				for section, kv := range keys {
					for k, v := range kv {
						if ini[section][k] != v {
							t.Errorf("%s [%s] %s = %q, want %q", secret, section, k, ini[section][k], v)
						}
					}
				}
			}
		})
	}
	// nova-compute never sees the databases or the metadata secret.
	compute, _ := novaParseINI(n.secrets["nova-compute-config"].StringData["nova.conf"])
	for _, section := range []string{"api_database", "database", "keystone_authtoken"} {
		if _, ok := compute[section]; ok {
			t.Errorf("compute nova.conf has [%s]", section)
		}
	}
	if strings.Contains(n.secrets["nova-compute-config"].StringData["nova.conf"], "@@NOVA_DB_PASSWORD@@") || strings.Contains(n.secrets["nova-compute-config"].StringData["nova.conf"], "@@METADATA_SECRET@@") {
		t.Errorf("compute nova.conf refers to the database password or the metadata secret")
	}
}

// TestNovaJob checks the init Job: its steps in order, the three databases for one user,
// the nova-manage commands with the rendered config, and the Keystone registration.
func TestNovaJob(t *testing.T) {
	n, _, _ := renderNova(t, deploy.DeploymentSpec{Images: testImages})
	job := n.job
	pod := job.Spec.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyNever || pod.SecurityContext == nil || *pod.SecurityContext.RunAsUser != 64060 {
		t.Errorf("Job restartPolicy %s securityContext %+v, want Never as uid 64060", pod.RestartPolicy, pod.SecurityContext)
	}
	all := podContainers(pod)
	var names []string
	for _, c := range all {
		names = append(names, c.Name)
	}
	want := []string{"config-render", "keystone-register", "db-create-nova-api", "db-create-nova", "db-create-nova-cell0", "db-setup"}
	if !reflect.DeepEqual(names, want) || len(pod.Containers) != 1 {
		t.Fatalf("Job steps = %v (the last is the main container), want %v", names, want)
	}
	for step, db := range map[string]string{"db-create-nova-api": "nova_api", "db-create-nova": "nova", "db-create-nova-cell0": "nova_cell0"} {
		c := containerByName(all, step)
		for name, want := range map[string]string{"DB_NAME": db, "DB_USER": "nova", "DB_HOST": "mariadb"} {
			if e := envByName(c, name); e == nil || e.Value != want {
				t.Errorf("%s env %s = %+v, want %q", step, name, e, want)
			}
		}
		if e := envByName(c, "DB_PASSWORD"); e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef.Name != "nova-db" {
			t.Errorf("%s DB_PASSWORD = %+v, want from Secret nova-db", step, e)
		}
		if !strings.Contains(strings.Join(c.Command, " "), "CREATE DATABASE IF NOT EXISTS") {
			t.Errorf("%s is not osd-lib's db-create script", step)
		}
	}
	// nova-manage's api_db sync, map_cell0, create_cell and db sync in one process.
	for _, step := range []string{"db-setup"} {
		c := containerByName(all, step)
		checkPythonCommand(t, c.Command, "manage.ApiDbCommands().sync", "manage.DbCommands().sync", "--config-file /etc/nova/nova.conf")
		var mounted bool
		for _, m := range c.VolumeMounts {
			mounted = mounted || (m.Name == "config" && m.MountPath == "/etc/nova/nova.conf" && m.SubPath == "nova.conf")
		}
		if !mounted {
			t.Errorf("%s mounts %v, want the rendered nova.conf", step, c.VolumeMounts)
		}
	}
	reg := containerByName(all, "keystone-register")
	for name, want := range map[string]string{"SVC_NAME": "nova", "SVC_USER": "nova", "SVC_TYPE": "compute", "OS_AUTH_URL": "http://keystone-api.openstack.svc:5000/v3", "OS_REGION_NAME": "RegionOne"} {
		if e := envByName(reg, name); e == nil || e.Value != want {
			t.Errorf("keystone-register env %s = %+v, want %q", name, e, want)
		}
	}
	if e := envByName(reg, "SVC_PASSWORD"); e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef.Name != "nova-keystone" {
		t.Errorf("keystone-register SVC_PASSWORD = %+v, want from Secret nova-keystone", e)
	}
	for name, want := range map[string]string{"ENDPOINT_ADMIN": "http://nova-api.openstack.svc:8774/v2.1", "ENDPOINT_INTERNAL": "http://nova-api.openstack.svc:8774/v2.1", "ENDPOINT_PUBLIC": "http://127.0.0.1:30774/v2.1"} {
		if e := envByName(reg, name); e == nil || e.Value != want {
			t.Errorf("keystone-register %s = %+v, want %q", name, e, want)
		}
	}
}

// TestNovaSecrets checks that secrets reach the pods only by reference to Secrets
// deploy.DefaultSecrets makes, and runs each pod's config-render script (/bin/sh, sed) over
// its config Secret: every placeholder is replaced, no value is in the manifests.
func TestNovaSecrets(t *testing.T) {
	generated := map[string]bool{}
	for _, s := range deploy.DefaultSecrets() {
		for k := range s.Keys {
			generated[s.Name+"/"+k] = true
		}
	}
	n, out, _ := renderNova(t, deploy.DeploymentSpec{Images: testImages})
	for name, pod := range n.pods() {
		for _, c := range podContainers(pod) {
			for _, e := range c.Env {
				switch {
				case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
					if ref := e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key; !generated[ref] {
						t.Errorf("%s %s env %s refers to %s, which deploy.DefaultSecrets() does not make", name, c.Name, e.Name, ref)
					}
				case strings.Contains(e.Name, "PASSWORD") || strings.Contains(e.Name, "SECRET"):
					t.Errorf("%s %s env %s is not from a Secret", name, c.Name, e.Name)
				}
			}
		}
		for _, v := range pod.Volumes {
			if v.Secret != nil && !strings.HasPrefix(v.Secret.SecretName, "nova-") {
				t.Errorf("%s mounts Secret %s, want only the chart's config Secrets", name, v.Secret.SecretName)
			}
		}
	}
	for _, s := range n.secrets {
		if s.Data != nil {
			t.Errorf("Secret %s has data, want only rendered config (stringData)", s.Name)
		}
	}

	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Fatalf("/bin/sh is not installed: %v", err)
	}
	byPod := map[string]*corev1.Secret{"DaemonSet/nova-compute": n.secrets["nova-compute-config"], "Job/" + n.job.Name: n.secrets["nova-config"]}
	for name := range n.deployments {
		byPod["Deployment/"+name] = n.secrets["nova-config"]
	}
	pods := n.pods()
	for name, secret := range byPod {
		t.Run(name, func(t *testing.T) {
			render := containerByName(pods[name].InitContainers, "config-render")
			if render == nil {
				t.Fatalf("%s has no config-render step", name)
			}
			dir, values := runConfigRender(t, render, secret.StringData)
			got, err := os.ReadFile(dir + "/nova.conf")
			if err != nil {
				t.Fatal(err)
			}
			want := placeholderRE.ReplaceAllStringFunc(secret.StringData["nova.conf"], func(p string) string {
				v, ok := values[placeholderRE.FindStringSubmatch(p)[1]]
				if !ok {
					t.Errorf("placeholder %s has no config-render env", p)
				}
				return v
			})
			if string(got) != want || strings.Contains(string(got), "@@") {
				t.Errorf("config-render nova.conf =\n%s\nwant\n%s", got, want)
			}
			for env, v := range values {
				if strings.Contains(out, v) {
					t.Errorf("manifests contain the value of %s", env)
				}
			}
		})
	}
}

// TestNovaOverrides checks the values the daemon sets per host: the public endpoint and
// noVNC base URL with the node's address, ClusterIP Services, and the HA profile.
func TestNovaOverrides(t *testing.T) {
	base, _, _ := renderNova(t, deploy.DeploymentSpec{Images: testImages})
	const public, novnc = "http://192.0.2.10:30774/v2.1", "http://192.0.2.10:30680/vnc_lite.html"
	n, _, _ := renderNova(t, novaOverrides(map[string]any{
		"endpoints":  map[string]any{"public": public},
		"service":    map[string]any{"type": "ClusterIP"},
		"novncproxy": map[string]any{"service": map[string]any{"type": "ClusterIP"}},
		"conf":       map[string]any{"nova": map[string]any{"vnc": map[string]any{"novncproxy_base_url": novnc}}},
	}))
	for _, bad := range []any{0, 3, -10, "15m"} {
		err := hhRenderError(t, "nova", novaOverrides(map[string]any{"cellSetup": map[string]any{"timeoutSeconds": bad}}))
		if err == nil || !strings.Contains(err.Error(), "cellSetup.timeoutSeconds is") || !strings.Contains(err.Error(), "at least 5") {
			t.Errorf("cellSetup.timeoutSeconds %v: render error = %v, want one naming the value and the minimum", bad, err)
		}
	}
	if err := hhRenderError(t, "nova", novaOverrides(map[string]any{"cellSetup": map[string]any{"timeoutSeconds": 60}})); err != nil {
		t.Errorf("cellSetup.timeoutSeconds 60: render error = %v", err)
	}
	if e := envByName(containerByName(podContainers(n.job.Spec.Template.Spec), "keystone-register"), "ENDPOINT_PUBLIC"); e == nil || e.Value != public {
		t.Errorf("keystone-register does not register the overridden public endpoint %s", public)
	}
	for _, secret := range []string{"nova-config", "nova-compute-config"} {
		if ini, _ := novaParseINI(n.secrets[secret].StringData["nova.conf"]); ini["vnc"]["novncproxy_base_url"] != novnc {
			t.Errorf("%s novncproxy_base_url = %q, want %s", secret, ini["vnc"]["novncproxy_base_url"], novnc)
		}
	}
	for _, name := range []string{"nova-api", "nova-novncproxy"} {
		if s := n.services[name]; s.Spec.Type != corev1.ServiceTypeClusterIP || s.Spec.Ports[0].NodePort != 0 {
			t.Errorf("Service %s = %s nodePort %d, want ClusterIP without nodePort", name, s.Spec.Type, s.Spec.Ports[0].NodePort)
		}
	}
	if n.job.Name == base.job.Name || n.compute.Spec.Template.Annotations["checksum/config"] == base.compute.Spec.Template.Annotations["checksum/config"] {
		t.Errorf("a config change kept Job %s or the compute checksum, want new ones", n.job.Name)
	}
	again, _, _ := renderNova(t, deploy.DeploymentSpec{Images: testImages})
	if again.job.Name != base.job.Name {
		t.Errorf("same values gave Jobs %s and %s, want one name", base.job.Name, again.job.Name)
	}
	ha, _, _ := renderNova(t, deploy.DeploymentSpec{Images: testImages, Profile: deploy.ProfileHA})
	var haNames []string
	for name, d := range ha.deployments {
		haNames = append(haNames, name)
		if *d.Spec.Replicas != 3 {
			t.Errorf("HA profile %s replicas = %d, want 3", name, *d.Spec.Replicas)
		}
	}
	// With more than one replica each service is its own Deployment, the APIs still one process.
	slices.Sort(haNames)
	if want := []string{"nova-api", "nova-conductor", "nova-novncproxy", "nova-scheduler"}; !reflect.DeepEqual(haNames, want) {
		t.Errorf("HA profile Deployments = %v, want %v", haNames, want)
	} else {
		if got := ha.deployments["nova-api"].Spec.Template.Spec.Containers[0].Command; len(got) < 4 || got[3] != "api" {
			t.Errorf("HA nova-api command = %.200q, want nova-server with api only", got)
		}
		for svc, dep := range map[string]string{"nova-api": "nova-api", "nova-novncproxy": "nova-novncproxy"} {
			if got, want := ha.services[svc].Spec.Selector, ha.deployments[dep].Spec.Selector.MatchLabels; !reflect.DeepEqual(got, want) {
				t.Errorf("HA Service %s selects %v, want %s's %v", svc, got, dep, want)
			}
		}
	}
}

// novaImageTree is the file tree of an image: every path (no leading slash) and, for symlinks,
// its target.
type novaImageTree map[string]*tar.Header

// novaReadImageTree reads the file tree of the catalog image name (built first if the
// image cache lacks it; layers flattened with their whiteouts) and its PATH.
func novaReadImageTree(t *testing.T, name string) (novaImageTree, []string) {
	t.Helper()
	img := catalogImage(t, name)
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	tree := readImageTree(t, img)
	var pathDirs []string
	for _, e := range cfg.Config.Env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			pathDirs = strings.Split(v, ":")
		}
	}
	return novaImageTree(tree.headers), pathDirs
}

// resolve follows symlinks (in any component) inside the tree and returns the header of
// the file p names, or nil.
func (tree novaImageTree) resolve(p string) *tar.Header {
	parts := strings.Split(strings.Trim(path.Clean("/"+p), "/"), "/")
	cur := ""
	for hops := 0; len(parts) > 0 && hops < 40; {
		next := path.Join(cur, parts[0])
		h := tree[next]
		if h == nil {
			return nil
		}
		if h.Typeflag == tar.TypeSymlink {
			hops++
			target := h.Linkname
			if !path.IsAbs(target) {
				target = path.Join("/", cur, target)
			}
			parts = append(strings.Split(strings.Trim(path.Clean(target), "/"), "/"), parts[1:]...)
			cur = ""
			continue
		}
		cur, parts = next, parts[1:]
		if len(parts) == 0 {
			return h
		}
	}
	return nil
}

// lookPath finds a command as the container runtime would, in the image's PATH.
func (tree novaImageTree) lookPath(cmd string, pathDirs []string) bool {
	if strings.Contains(cmd, "/") {
		h := tree.resolve(cmd)
		return h != nil && h.Typeflag == tar.TypeReg && h.Mode&0o111 != 0
	}
	for _, d := range pathDirs {
		if h := tree.resolve(path.Join(d, cmd)); h != nil && h.Typeflag == tar.TypeReg && h.Mode&0o111 != 0 {
			return true
		}
	}
	return false
}

// TestNovaImages checks, in the images osd builds (the image cache, built first when it
// lacks them: see catalogImage), that every command the nova chart runs exists: each
// container's command in the image's PATH, the programs its scripts call, and the files
// its config names.
func TestNovaImages(t *testing.T) {
	if testing.Short() {
		t.Skip("reads whole images (about 20 s) and may build them; skipped in -short")
	}
	n, _, _ := renderNova(t, deploy.DeploymentSpec{Images: testImages})
	commands := map[string]map[string]bool{} // image -> commands of its containers
	for _, pod := range n.pods() {
		for _, c := range podContainers(pod) {
			name := ""
			for img, ref := range testImages {
				if ref == c.Image {
					name = img
				}
			}
			if commands[name] == nil {
				commands[name] = map[string]bool{}
			}
			commands[name][c.Command[0]] = true
		}
	}
	tests := []struct {
		image    string
		programs []string // called by the steps' scripts and probes
		files    []string // named by the config or the packages' defaults
	}{
		{
			image:    "openstack",
			programs: []string{"sed", "mysql", "mysqladmin", "openstack", "nova-manage", "grep", "basename"},
			files: []string{
				"usr/share/novnc/vnc_lite.html",             // [vnc] novncproxy_base_url
				"etc/nova/api-paste.ini",                    // nova-api's api_paste_config
				"etc/default/nova-consoleproxy",             // NOVA_CONSOLE_PROXY_TYPE=novnc
				"usr/lib/python3/dist-packages/pymysql",     // mysql+pymysql://
				"usr/lib/python3/dist-packages/memcache.py", // keystonemiddleware's memcached_servers
			},
		},
		{
			image:    "compute",
			programs: []string{"sed", "basename", "pgrep", "test", "qemu-img", "privsep-helper", "sudo"},
			files: []string{
				"usr/lib/python3/dist-packages/vif_plug_ovs", // os-vif's OVS plugin ([os_vif_ovs])
				"usr/lib/python3/dist-packages/ovsdbapp",     // its native OVSDB client
				"usr/lib/python3/dist-packages/libvirt.py",   // python3-libvirt
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.image, func(t *testing.T) {
			began := time.Now()
			tree, pathDirs := novaReadImageTree(t, tt.image)
			t.Logf("read %d entries of image %s in %s", len(tree), tt.image, time.Since(began).Round(100*time.Millisecond))
			if len(commands[tt.image]) == 0 {
				t.Fatalf("the chart runs nothing from image %s", tt.image)
			}
			for cmd := range commands[tt.image] {
				if !tree.lookPath(cmd, pathDirs) {
					t.Errorf("image %s lacks the container command %s (PATH %v)", tt.image, cmd, pathDirs)
				}
			}
			for _, p := range tt.programs {
				if !tree.lookPath(p, pathDirs) {
					t.Errorf("image %s lacks %s, which the chart's scripts call", tt.image, p)
				}
			}
			for _, f := range tt.files {
				if tree.resolve(f) == nil {
					t.Errorf("image %s lacks %s", tt.image, f)
				}
			}
			if tt.image == "openstack" {
				// The nova user the pods run as.
				if h := tree.resolve("var/lib/nova/tmp"); h == nil || h.Uid != 64060 {
					t.Errorf("image openstack var/lib/nova/tmp = %+v, want owned by nova (64060): lock_path", h)
				}
			}
		})
	}
}

// TestNovaInDebianImage runs what the nova chart renders against the openstack image osd
// built (extracted from the image store into t.TempDir()), as the nova user, in private
// mount and PID namespaces: the config-render script, the init Job's nova-manage steps
// (map_cell0 and create-cell1 twice: they must be idempotent), the Deployments' wait-db
// step (waiting before the db syncs, passing after), nova-compute's wait-conductor step
// (waiting, no Python error), and nova-server with both APIs, the conductor and the
// scheduler in one process, whose probe path answers without a token while the API asks
// for one. Only what a host lacks
// is overridden through the values: SQLite instead of MariaDB and free loopback ports.
// MariaDB, RabbitMQ and Keystone are not contacted (db-create and keystone-register are
// osd-lib's steps, run by the other charts' tests).
func TestNovaInDebianImage(t *testing.T) {
	switch {
	case testing.Short():
		t.Skip("extracts the openstack image and runs nova for about two minutes; skipped in -short")
	case os.Geteuid() != 0:
		t.Skip("needs root for namespaces, chroot and the image's file owners")
	}
	for _, tool := range []string{"unshare", "tar", "chroot", "timeout"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (test/deps.sh installs it): %v", tool, err)
		}
	}
	img := catalogImage(t, "openstack")
	root := t.TempDir()
	began := time.Now()
	unpackImage(t, img, root)
	t.Logf("extracted image openstack in %s", time.Since(began).Round(100*time.Millisecond))

	// The databases live where the nova user can write, as MariaDB's would.
	data := "/var/lib/nova/osd-test"
	if err := os.Mkdir(filepath.Join(root, data), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(root, data), 64060, 64060); err != nil {
		t.Fatal(err)
	}
	api, metadata, novnc := freePort(t), freePort(t), freePort(t)
	n, _, _ := renderNova(t, novaOverrides(map[string]any{"conf": map[string]any{"controlPlane": map[string]any{
		"DEFAULT": map[string]any{"osapi_compute_listen": "127.0.0.1", "osapi_compute_listen_port": api,
			"metadata_listen": "127.0.0.1", "metadata_listen_port": metadata},
		"vnc":          map[string]any{"novncproxy_host": "127.0.0.1", "novncproxy_port": novnc},
		"api_database": map[string]any{"connection": "sqlite:///" + data + "/nova_api.db"},
		"database":     map[string]any{"connection": "sqlite:///" + data + "/nova.db"},
	}}}))
	job := n.job.Spec.Template.Spec
	conf, _ := runConfigRender(t, containerByName(job.InitContainers, "config-render"), n.secrets["nova-config"].StringData)
	rendered, err := os.ReadFile(filepath.Join(conf, "nova.conf"))
	if err != nil {
		t.Fatal(err)
	}
	// The pods mount the rendered file at /etc/nova/nova.conf (subPath of the config volume).
	writeConf := func(data []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(root, "etc/nova/nova.conf"), data, 0o640); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(filepath.Join(root, "etc/nova/nova.conf"), 0, 64060); err != nil {
			t.Fatal(err)
		}
	}
	writeConf(rendered)
	// As made before each service had a RabbitMQ user of its own (all shared openstack on /).
	oldURL := "rabbit://openstack:0123abcd@rabbitmq.openstack.svc:5672/"
	oldConf := regexp.MustCompile(`(?m)^transport_url = .*$`).ReplaceAll(rendered, []byte("transport_url = "+oldURL))

	// run runs a container's command in the image as the nova user; timeout 0 = none.
	const enter = `set -e
r=$1; shift
mount -t proc proc "$r/proc"
mount -t tmpfs tmpfs "$r/tmp"
mount --rbind /dev "$r/dev"
exec chroot --userspec=64060:64060 "$r" "$@"
`
	command := func(c *corev1.Container, timeout time.Duration) *exec.Cmd {
		args := []string{"-m", "-p", "-f", "--kill-child", "/bin/sh", "-c", enter, "enter", root}
		if timeout > 0 {
			args = append(args, "timeout", fmt.Sprint(int(timeout.Seconds())))
		}
		cmd := exec.Command("unshare", append(args, c.Command...)...)
		cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "HOME=/var/lib/nova"}
		return cmd
	}
	step := func(pod corev1.PodSpec, name string, timeout time.Duration) (string, error) {
		t.Helper()
		c := containerByName(podContainers(pod), name) // the Job's last step is its main container
		if c == nil {
			t.Fatalf("no step %s", name)
		}
		began := time.Now()
		b, err := command(c, timeout).CombinedOutput()
		t.Logf("%s: %s (%v)", name, time.Since(began).Round(100*time.Millisecond), err)
		return string(b), err
	}
	mustStep := func(pod corev1.PodSpec, name string) string {
		t.Helper()
		out, err := step(pod, name, 0)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, tail(out, 20))
		}
		return out
	}

	conductor := n.deployments["nova-server"].Spec.Template.Spec
	if out, err := step(conductor, "wait-db", 20*time.Second); err == nil || !strings.Contains(out, "waiting for the nova-init Job") {
		t.Errorf("wait-db before the db syncs = %v\n%s\nwant it waiting", err, tail(out, 5))
	}
	// Twice: a re-run of the Job migrates nothing and keeps the one cell1. The first run
	// with the shared RabbitMQ user's transport_url, as on a cloud made before: the second
	// points cell1 at the config's (the API reaches the computes through the mapping).
	for i := 0; i < 2; i++ {
		writeConf([][]byte{oldConf, rendered}[i])
		out := mustStep(job, "db-setup")
		if updated := strings.Contains(out, "cell_v2 update_cell: cell1's transport_url set to this config's"); updated != (i == 1) {
			t.Errorf("db-setup run %d updated cell1's transport_url: %v, want %v:\n%s", i+1, updated, i == 1, tail(out, 10))
		}
		for _, done := range []string{"api_db sync: done", "cell_v2 map_cell0: done", "db sync: done"} {
			if !strings.Contains(out, done) {
				t.Errorf("db-setup run %d does not say %q:\n%s", i+1, done, tail(out, 10))
			}
		}
		if cell1 := []string{"cell_v2 create_cell --name cell1: done", "cell_v2 create_cell: cell1 exists"}[i]; !strings.Contains(out, cell1) {
			t.Errorf("db-setup run %d does not say %q:\n%s", i+1, cell1, tail(out, 10))
		}
	}
	mustStep(conductor, "wait-db")
	mustStep(n.cellSetup.Spec.Template.Spec, "wait-db")
	// nova-compute's wait-conductor gets as far as its ping and keeps waiting: no RabbitMQ
	// (nor conductor) answers here, so the timeout ends it.
	if out, err := step(n.compute.Spec.Template.Spec, "wait-conductor", 20*time.Second); err == nil || strings.Contains(out, "Traceback") || strings.Contains(out, "answered after") {
		t.Errorf("wait-conductor without RabbitMQ = %v\n%s\nwant it waiting until the timeout, without a Python error", err, tail(out, 8))
	}
	// No nova-compute runs here: the cell setup finds no host to map and keeps waiting.
	if out, err := step(n.cellSetup.Spec.Template.Spec, "discover-hosts", 20*time.Second); err == nil || !strings.Contains(out, "Found 0 unmapped computes in cell") {
		t.Errorf("discover-hosts without a compute host = %v\n%s\nwant it mapping nothing and waiting", err, tail(out, 8))
	}
	// With a 5 s timeout it gives up by itself and says what to look at.
	short := n.cellSetup.Spec.Template.Spec.DeepCopy()
	discover := containerByName(podContainers(*short), "discover-hosts")
	discover.Command[3] = "5"
	if out, err := step(*short, "discover-hosts", 60*time.Second); err == nil || !strings.Contains(out, "no nova-compute host registered in cell1 after") || strings.Contains(out, "Traceback") {
		t.Errorf("discover-hosts with a 5 s timeout = %v\n%s\nwant it to give up naming the nova-compute DaemonSet", err, tail(out, 8))
	}

	// The cells: cell0 and exactly one cell1 with the rendered transport URL.
	list := &corev1.Container{Command: []string{"nova-manage", "--config-file", "/etc/nova/nova.conf", "cell_v2", "list_cells", "--verbose"}}
	b, err := command(list, 0).CombinedOutput()
	if err != nil {
		t.Fatalf("list_cells: %v\n%s", err, b)
	}
	cells := string(b)
	if strings.Count(cells, "| cell1 ") != 1 || strings.Count(cells, "| cell0 ") != 1 || !strings.Contains(cells, "rabbit://nova:") ||
		!strings.Contains(cells, "@rabbitmq.openstack.svc:5672/nova ") || strings.Contains(cells, oldURL) {
		t.Errorf("cells after two runs =\n%s\nwant one cell0 and one cell1 with the rendered transport_url", cells)
	}

	// nova-compute's set-up (its program up to main) in the image's Python: a command with
	// limits runs under util-linux's prlimit with them set; one naming its interpreter
	// keeps oslo's prlimit module.
	compute := containerByName(n.compute.Spec.Template.Spec.Containers, "nova-compute")
	setup, _, found := strings.Cut(compute.Command[2], "sys.exit(main())  # end of the set-up")
	if !found {
		t.Fatalf("nova-compute's program has no end-of-set-up line:\n%s", compute.Command[2])
	}
	check := setup + `
seen = []
limits = processutils.ProcessLimits(address_space=1 << 30, cpu_time=30)
out, _ = processutils.execute("sh", "-c", "ulimit -v; ulimit -t", prlimit=limits, on_execute=lambda p: seen.append(p.args))
print("limits", " ".join(out.split()), "argv", " ".join(seen[-1][:5]))
processutils.execute("true", prlimit=limits, python_exec=sys.executable, on_execute=lambda p: seen.append(p.args))
print("python_exec", " ".join(seen[-1][:3]))
`
	b, err = command(&corev1.Container{Command: []string{"/usr/bin/python3", "-c", check}}, 60*time.Second).CombinedOutput()
	if err != nil {
		t.Fatalf("nova-compute's set-up: %v\n%s", err, tail(string(b), 10))
	}
	for _, want := range []string{
		"limits 1048576 30 argv /usr/bin/prlimit --as=1073741824 --cpu=30 -- sh",
		"python_exec /usr/bin/python3 -m oslo_concurrency.prlimit",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("nova-compute's set-up printed\n%s\nwant a line with %q", b, want)
		}
	}

	// nova-server, as the Deployment runs it, with one more config file: oslo.messaging's
	// in-process transport instead of RabbitMQ, so that the conductor's and scheduler's RPC
	// servers start (with none they would keep reconnecting, and a stop waits for them).
	if err := os.WriteFile(filepath.Join(root, "etc/nova/osd-test-rpc.conf"), []byte("[DEFAULT]\ntransport_url = fake:/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	serverPod := n.deployments["nova-server"].Spec.Template.Spec
	c := containerByName(serverPod.Containers, "nova-server").DeepCopy()
	c.Command = append(c.Command, "--config-file", "/etc/nova/osd-test-rpc.conf")
	logFile := filepath.Join(t.TempDir(), "nova-server.log")
	cmd := command(c, 0)
	// The noVNC proxy started on demand exits after 4 s without a connection (600 in a pod).
	start(t, cmd.Args, append(cmd.Env, "NOVA_SERVER_NOVNC_IDLE_EXIT=4"), logFile)
	probe := *c.ReadinessProbe
	probe.HTTPGet = probe.HTTPGet.DeepCopy()
	if probe.HTTPGet.Port.IntValue() != 8774 {
		t.Errorf("nova-server probe port = %s, want 8774 (osapi_compute)", probe.HTTPGet.Port.String())
	}
	resp := waitProbe(t, fmt.Sprintf("http://127.0.0.1:%d", api), probe, logFile)
	if !strings.Contains(resp.body, `"v2.1"`) {
		t.Errorf("GET / = %s, want the version document with v2.1", resp.body)
	}
	checkUnauthorized(t, fmt.Sprintf("http://127.0.0.1:%d/v2.1/servers", api), "http://127.0.0.1:30500/v3")
	if r, err := get(fmt.Sprintf("http://127.0.0.1:%d/", metadata)); err != nil || r.status != 200 || !strings.Contains(r.body, "latest") {
		t.Errorf("metadata GET / = %+v (%v), want 200 with the metadata versions", r, err)
	}
	// The conductor registers in the database as nova-conductor does. The scheduler needs
	// Keystone's catalog (no Keystone here): it waits, saying why, while the rest serves.
	q := fmt.Sprintf("import sqlite3,sys; r=sqlite3.connect(%q).execute(\"select count(*) from services where `binary`='nova-conductor' and deleted=0\").fetchone()[0]; sys.exit(0 if r == 1 else 'nova-conductor rows: %%d' %% r)", data+"/nova.db")
	var registered error
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(time.Second) {
		var out []byte
		out, registered = command(&corev1.Container{Command: []string{"python3", "-c", q}}, 20*time.Second).CombinedOutput()
		if registered == nil || time.Now().After(deadline) {
			if registered != nil {
				t.Errorf("nova-conductor in the services table: %v\n%s", registered, tail(string(out), 5))
			}
			break
		}
	}
	if b, _ := os.ReadFile(logFile); !strings.Contains(string(b), "nova-scheduler cannot start yet (Keystone or Placement") {
		t.Errorf("nova-server's log does not say why the scheduler waits:\n%s", tail(string(b), 10))
	}
	// Processes of this test only (a deployed nova-server on this host is in another root):
	// every service answers from one process, and no noVNC proxy runs before a console
	// connection asks for one.
	procs := func() map[string]string { // pid -> parent pid
		out, _ := exec.Command("pgrep", "-f", "^/usr/bin/python3 -c # nova-server:").Output()
		ppid := map[string]string{}
		for _, pid := range strings.Fields(string(out)) {
			status, _ := os.ReadFile("/proc/" + pid + "/status")
			m := regexp.MustCompile(`(?m)^PPid:\s+(\d+)$`).FindSubmatch(status)
			if r, err := os.Readlink("/proc/" + pid + "/root"); err == nil && r == root && m != nil {
				ppid[pid] = string(m[1])
			}
		}
		return ppid
	}
	// proxy is the noVNC proxy forked from nova-server (their pids), "" when none runs.
	proxy := func() (server, pid string) {
		ppid := procs()
		for p, parent := range ppid {
			if _, ok := ppid[parent]; !ok {
				server = p // the one whose parent is not nova-server's program
			}
		}
		for p, parent := range ppid {
			if parent == server {
				pid = p // not a connection's process the proxy forked
			}
		}
		return server, pid
	}
	logTail := func() string { b, _ := os.ReadFile(logFile); return tail(string(b), 8) }
	if p := procs(); len(p) != 1 {
		t.Errorf("nova-server processes before a console connection = %v, want 1 (api, conductor and scheduler in one process, no nova-novncproxy yet)", p)
	}

	// The first connection starts the proxy, which serves the noVNC client named by
	// novncproxy_base_url; with no connection for 4 s it exits and nova-server stays.
	page := corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/vnc_lite.html"}}}
	getPage := func() {
		t.Helper()
		if r := waitProbe(t, fmt.Sprintf("http://127.0.0.1:%d", novnc), page, logFile); !strings.Contains(r.body, "noVNC") {
			t.Errorf("GET /vnc_lite.html = %.200s, want the noVNC client", r.body)
		}
		// The client leaves, as a browser closing the console does: a connection kept
		// alive is one the proxy still serves.
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	}
	getPage()
	server, first := proxy()
	if first == "" {
		t.Fatalf("no nova-novncproxy forked from nova-server after a console connection, processes %v:\n%s", procs(), logTail())
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if _, err := os.Stat("/proc/" + first); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nova-novncproxy (pid %s) still runs 30 s after its connection, want it to exit after 4 s without one:\n%s", first, logTail())
		}
	}
	if _, err := os.Stat("/proc/" + server); err != nil || !strings.Contains(logTail(), "had no connection for 4 s and stopped") {
		t.Fatalf("after the noVNC proxy's idle exit: nova-server (pid %s) %v, want it running and saying why the proxy stopped:\n%s", server, err, logTail())
	}
	// The next connection starts a new proxy. When a proxy fails (killed here), nova-server
	// ends (and the kubelet restarts the pod).
	getPage()
	again, second := proxy()
	if second == "" || second == first || again != server {
		t.Fatalf("after a second console connection: proxy %q of %q, want a new one (not %s) of nova-server %s:\n%s", second, again, first, server, logTail())
	}
	p, _ := strconv.Atoi(second)
	_ = syscall.Kill(p, syscall.SIGKILL)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if _, err := os.Stat("/proc/" + server); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("nova-server (pid %s) still runs 30s after its nova-novncproxy was killed, want it to exit:\n%s", server, logTail())
			break
		}
	}
}
