package charts

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osdcloud/osd/daemon/deploy"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// typedAll decodes every object of a rendered chart, keyed by Kind/name.
func typedAll(t *testing.T, objs []object) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, o := range objs {
		obj := decodeObject(t, o)
		name := o.Metadata.Name
		if o.Kind == "Job" {
			name = name[:strings.LastIndex(name, "-")]
		}
		out[o.Kind+"/"+name] = obj
	}
	return out
}

func renderService(t *testing.T, name string, spec deploy.DeploymentSpec) ([]object, map[string]any) {
	t.Helper()
	svc, ok := deploy.DefaultCatalog().Service(name)
	if !ok {
		t.Fatalf("catalog has no %s", name)
	}
	objs, _ := render(t, FS, name, svc, spec)
	return objs, typedAll(t, objs)
}

func TestOVNChart(t *testing.T) {
	objs, typed := renderService(t, "ovn", deploy.DeploymentSpec{Images: testImages})
	want := []string{"DaemonSet/ovn-controller", "DaemonSet/ovn-controller-gateway", "Deployment/ovn-central", "Service/ovn-nb", "Service/ovn-sb"}
	if got := kinds(objs); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("Template(ovn) = %v, want %v", got, want)
	}
	for name, ip := range map[string]string{"ovn-nb": "10.43.0.41", "ovn-sb": "10.43.0.42"} {
		if got := typed["Service/"+name].(*corev1.Service).Spec.ClusterIP; got != ip {
			t.Errorf("Service %s clusterIP = %q, want %s (neutron's config uses it)", name, got, ip)
		}
	}
	central := typed["Deployment/ovn-central"].(*appsv1.Deployment)
	if central.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("ovn-central strategy = %s, want Recreate (one writer per database)", central.Spec.Strategy.Type)
	}
	ports := map[string][]int32{}
	for _, c := range central.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			ports[c.Name] = append(ports[c.Name], p.ContainerPort)
		}
	}
	if fmt.Sprint(ports["ovsdb-nb"]) != "[6641]" || fmt.Sprint(ports["ovsdb-sb"]) != "[6642 16642]" || containerByName(central.Spec.Template.Spec.Containers, "northd") == nil {
		t.Errorf("ovn-central containers/ports = %v, want ovsdb-nb 6641, ovsdb-sb 6642 and 16642, and northd", ports)
	}
	// Every database listens with SSL only, with the certificate from osd's OVN CA; the
	// southbound chassis port is restricted by the RBAC role ovn-controller.
	hasTLS := false
	for _, v := range central.Spec.Template.Spec.Volumes {
		if v.Name == "tls" && v.Secret != nil && v.Secret.SecretName == deploy.OVNCentralSecret {
			hasTLS = true
		}
	}
	if !hasTLS {
		t.Errorf("ovn-central volumes lack Secret %s", deploy.OVNCentralSecret)
	}
	for _, tt := range []struct {
		container string
		want      []string
	}{
		{"ovsdb-nb", []string{"--remote=pssl:6641:0.0.0.0", "--private-key=/etc/ovn/tls/tls.key", "--certificate=/etc/ovn/tls/tls.crt", "--ca-cert=/etc/ovn/tls/ca.crt"}},
		{"ovsdb-sb", []string{"--remote=db:OVN_Southbound,SB_Global,connections", "--remote=pssl:16642:0.0.0.0", "--ca-cert=/etc/ovn/tls/ca.crt"}},
		{"northd", []string{"set-connection role=ovn-controller pssl:6642:0.0.0.0", "--ovnsb-db=unix:/run/ovn/ovnsb_db.sock"}},
	} {
		c := containerByName(central.Spec.Template.Spec.Containers, tt.container)
		script := strings.Join(c.Command, " ")
		for _, w := range tt.want {
			if !strings.Contains(script, w) {
				t.Errorf("%s script lacks %q:\n%s", tt.container, w, script)
			}
		}
		if strings.Contains(script, "ptcp:") {
			t.Errorf("%s still listens on plain TCP:\n%s", tt.container, script)
		}
		if tt.container != "northd" && !hasMount(c, "tls", "/etc/ovn/tls") {
			t.Errorf("%s does not mount the certificate at /etc/ovn/tls", tt.container)
		}
	}
	if got := servicePorts(typed["Service/ovn-sb"].(*corev1.Service)); got != "ovsdb=6642 ovsdb-central=16642" {
		t.Errorf("Service ovn-sb ports = %s, want ovsdb=6642 ovsdb-central=16642", got)
	}
	if got := servicePorts(typed["Service/ovn-nb"].(*corev1.Service)); got != "ovsdb=6641" {
		t.Errorf("Service ovn-nb ports = %s, want ovsdb=6641", got)
	}
	for _, v := range central.Spec.Template.Spec.Volumes {
		if v.Name == "data" && (v.HostPath == nil || v.HostPath.Path != "/var/lib/osd/volumes/ovn") {
			t.Errorf("ovn-central data volume = %+v, want hostPath /var/lib/osd/volumes/ovn", v.VolumeSource)
		}
	}
	for _, tt := range []struct {
		name    string
		gateway bool
	}{{"ovn-controller", false}, {"ovn-controller-gateway", true}} {
		t.Run(tt.name, func(t *testing.T) {
			ds := typed["DaemonSet/"+tt.name].(*appsv1.DaemonSet)
			pod := ds.Spec.Template.Spec
			if !pod.HostNetwork || pod.DNSPolicy != corev1.DNSClusterFirstWithHostNet || pod.NodeSelector["node-restriction.kubernetes.io/openvswitch"] != "enabled" {
				t.Errorf("%s hostNetwork=%v dnsPolicy=%s nodeSelector=%v, want host network, cluster DNS, openvswitch=enabled", tt.name, pod.HostNetwork, pod.DNSPolicy, pod.NodeSelector)
			}
			expr := pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0]
			wantOp := corev1.NodeSelectorOpNotIn
			if tt.gateway {
				wantOp = corev1.NodeSelectorOpIn
			}
			if expr.Key != "node-restriction.kubernetes.io/openstack-gateway" || expr.Operator != wantOp {
				t.Errorf("%s affinity = %+v, want openstack-gateway %s enabled", tt.name, expr, wantOp)
			}
			c := pod.Containers[0]
			if env := envByName(&c, "GATEWAY"); env == nil || (env.Value == "enabled") != tt.gateway {
				t.Errorf("%s GATEWAY env = %+v, want enabled=%v", tt.name, env, tt.gateway)
			}
			if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
				t.Errorf("%s is not privileged", tt.name)
			}
			if len(pod.Tolerations) != 1 || pod.Tolerations[0].Key != "osd.cloud/no-control-plane" || pod.Tolerations[0].Operator != corev1.TolerationOpExists {
				t.Errorf("%s tolerations = %+v, want osd.cloud/no-control-plane (nodes without the control role)", tt.name, pod.Tolerations)
			}
			script := strings.Join(c.Command, " ")
			for _, w := range []string{"external_ids:ovn-remote=\"ssl:$sb:6642\"", "ovn-encap-ip=\"$encap\"", "ovn-bridge-datapath-type=\"$dp\"", "ovn-bridge-mappings=\"physnet1:br-ex\"", "sock=/run/openvswitch/db.sock", "exec ovn-controller unix:$sock",
				"--private-key=$tls/chassis.key --certificate=$tls/chassis.crt --ca-cert=$tls/ca.crt"} {
				if !strings.Contains(script, w) {
					t.Errorf("%s script lacks %q", tt.name, w)
				}
			}
			if !hasMount(&c, "chassis-cert", "/etc/ovn/chassis") || !hasHostPath(pod.Volumes, "chassis-cert", "/var/lib/openvswitch/osd-ovn-chassis") {
				t.Errorf("%s does not mount the host's chassis certificate directory /var/lib/openvswitch/osd-ovn-chassis at /etc/ovn/chassis", tt.name)
			}
		})
	}
}

// TestOVNControllerScript runs the ovn-controller start script's datapath choice in a
// shell with ovs-vsctl replaced by a function: br-ex's type wins, else the kernel module.
func TestOVNControllerScript(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Fatalf("/bin/sh is not installed: %v", err)
	}
	_, typed := renderService(t, "ovn", deploy.DeploymentSpec{Images: testImages})
	script := typed["DaemonSet/ovn-controller-gateway"].(*appsv1.DaemonSet).Spec.Template.Spec.Containers[0].Command[2]
	dir := t.TempDir()
	// The chassis certificate osd issued, in a directory of the test's.
	certs := filepath.Join(dir, "chassis")
	os.MkdirAll(certs, 0o755)
	for _, f := range []string{"chassis.key", "chassis.crt", "ca.crt"} {
		os.WriteFile(filepath.Join(certs, f), []byte("pem"), 0o600)
	}
	script = strings.ReplaceAll(script, "tls=/etc/ovn/chassis", "tls="+certs)
	log := filepath.Join(dir, "vsctl.log")
	for _, tt := range []struct {
		name, brexType, want, encap, wantEncap string
	}{
		{"br-ex netdev", "netdev", `ovn-bridge-datapath-type=netdev`, "", "external_ids:ovn-encap-ip=192.0.2.10"},
		{"br-ex system", "system", `ovn-bridge-datapath-type=system`, "", "external_ids:ovn-encap-ip=192.0.2.10"},
		{"tunnel endpoint chosen by osd", "netdev", `ovn-bridge-datapath-type=netdev`, "10.98.0.1", "external_ids:ovn-encap-ip=10.98.0.1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(log)
			// A fake ovs-vsctl and ovn-controller on PATH: they record their arguments.
			bin := filepath.Join(dir, "bin")
			os.MkdirAll(bin, 0o755)
			encap := ""
			if tt.encap != "" {
				encap = "*'get open . external_ids:osd-encap-ip'*) echo '\"" + tt.encap + "\"';; "
			}
			fake := "#!/bin/sh\necho \"$@\" >> " + log + "\ncase \"$*\" in *'get bridge br-ex datapath_type'*) echo '\"" + tt.brexType + "\"';; *'get open . external_ids:system-id'*) echo '\"abc\"';; " + encap + "esac\n"
			os.WriteFile(filepath.Join(bin, "ovs-vsctl"), []byte(fake), 0o755)
			os.WriteFile(filepath.Join(bin, "ovn-controller"), []byte("#!/bin/sh\necho ovn-controller \"$@\" >> "+log+"\n"), 0o755)
			os.WriteFile(filepath.Join(bin, "getent"), []byte("#!/bin/sh\necho '10.43.0.99 ovn-sb'\n"), 0o755)
			cmd := exec.Command("sh", "-ec", script)
			cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "NODE_NAME=node1", "NODE_IP=192.0.2.10", "GATEWAY=enabled"}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("script: %v\n%s", err, out)
			}
			got, _ := os.ReadFile(log)
			for _, w := range []string{tt.want, "external_ids:ovn-remote=ssl:10.43.0.99:6642", tt.wantEncap, "external_ids:system-id=abc", "external_ids:hostname=node1", "ovn-bridge-mappings=physnet1:br-ex", "ovn-cms-options=enable-chassis-as-gw", "ovn-controller unix:/run/openvswitch/db.sock --private-key=" + certs + "/chassis.key"} {
				if !strings.Contains(string(got), w) {
					t.Errorf("script calls lack %q:\n%s", w, got)
				}
			}
		})
	}
}

func TestNeutronChart(t *testing.T) {
	objs, typed := renderService(t, "neutron", deploy.DeploymentSpec{Images: testImages})
	want := []string{"DaemonSet/neutron-ovn-metadata-agent", "Deployment/neutron-server", "Job/neutron-init-", "Secret/neutron-config", "Service/neutron-server"}
	got := kinds(objs)
	if len(got) != len(want) {
		t.Fatalf("Template(neutron) = %v, want %v", got, want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("Template(neutron)[%d] = %s, want %s", i, got[i], want[i])
		}
	}
	server := typed["Deployment/neutron-server"].(*appsv1.Deployment)
	c := containerByName(server.Spec.Template.Spec.Containers, "neutron-server")
	if c == nil || c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Port.IntValue() != 9696 {
		t.Fatalf("neutron-server container/probe = %+v, want an HTTP probe on 9696", c)
	}
	// neutron-server waits for the Job's migrations (EXPAND_HEAD and CONTRACT_HEAD in the
	// database) instead of crash-looping on missing tables.
	var inits []string
	for _, ic := range server.Spec.Template.Spec.InitContainers {
		inits = append(inits, ic.Name)
	}
	if strings.Join(inits, ",") != "config-render,wait-db" {
		t.Errorf("neutron-server init containers = %v, want config-render,wait-db", inits)
	}
	if w := containerByName(server.Spec.Template.Spec.InitContainers, "wait-db"); w != nil {
		script := w.Command[2]
		i, j := strings.Index(script, "python3 -c '"), strings.Index(script, "'; do")
		if i < 0 || j < i || !strings.Contains(script, "EXPAND_HEAD") || !strings.Contains(script, "CONTRACT_HEAD") {
			t.Fatalf("wait-db script = %q, want a python3 check of the expand and contract heads", script)
		}
		cmd := exec.Command("python3", "-c", "import sys; compile(sys.stdin.read(), 'wait-db', 'exec')")
		cmd.Stdin = strings.NewReader(script[i+len("python3 -c '") : j])
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("wait-db's Python does not compile: %v\n%s", err, out)
		}
	}
	// neutron-server.py: Debian's neutron-server main without the RPC worker and without
	// a process of its own for the in-thread workers (ML2/OVN only).
	checkPythonCommand(t, c.Command, "from neutron.cmd.eventlet.server import main", "service._get_rpc_workers = rpc_workers",
		"--config-file /etc/neutron/neutron.conf --config-file /etc/neutron/plugins/ml2/ml2_conf.ini")
	// OVN's databases over SSL: the server's certificate from its Secret, the metadata
	// agent's from the host's chassis certificate directory (after waiting for it).
	if !hasMount(c, "ovn-tls", "/etc/neutron/ovn-tls") || !hasSecretVolume(server.Spec.Template.Spec.Volumes, "ovn-tls", deploy.OVNNeutronSecret) {
		t.Errorf("neutron-server does not mount Secret %s at /etc/neutron/ovn-tls", deploy.OVNNeutronSecret)
	}
	agentPod := typed["DaemonSet/neutron-ovn-metadata-agent"].(*appsv1.DaemonSet).Spec.Template.Spec
	if ac := containerByName(agentPod.Containers, "metadata-agent"); ac == nil || !hasMount(ac, "chassis-cert", "/etc/ovn/chassis") || !hasHostPath(agentPod.Volumes, "chassis-cert", "/var/lib/openvswitch/osd-ovn-chassis") {
		t.Errorf("the metadata agent does not mount the host's chassis certificate directory at /etc/ovn/chassis")
	}
	if w := containerByName(agentPod.InitContainers, "wait-chassis-cert"); w == nil || !strings.Contains(w.Command[2], "/etc/ovn/chassis/chassis.crt") {
		t.Errorf("the metadata agent does not wait for its chassis certificate")
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.SubPath] = m.MountPath
	}
	if mounts["ml2_conf.ini"] != "/etc/neutron/plugins/ml2/ml2_conf.ini" || mounts["neutron.conf"] != "/etc/neutron/neutron.conf" {
		t.Errorf("neutron-server mounts = %v", mounts)
	}
	svc := typed["Service/neutron-server"].(*corev1.Service)
	if svc.Spec.Type != corev1.ServiceTypeNodePort || svc.Spec.Ports[0].NodePort != 30696 {
		t.Errorf("Service neutron-server = %s %+v, want NodePort 30696", svc.Spec.Type, svc.Spec.Ports)
	}
	job := typed["Job/neutron-init"].(*batchv1.Job)
	var steps []string
	for _, s := range job.Spec.Template.Spec.InitContainers {
		steps = append(steps, s.Name)
	}
	for _, s := range job.Spec.Template.Spec.Containers {
		steps = append(steps, s.Name)
	}
	if strings.Join(steps, ",") != "config-render,db-create,db-sync,keystone-register" {
		t.Errorf("neutron-init steps = %v", steps)
	}
	agent := typed["DaemonSet/neutron-ovn-metadata-agent"].(*appsv1.DaemonSet)
	pod := agent.Spec.Template.Spec
	if !pod.HostNetwork || pod.NodeSelector["node-restriction.kubernetes.io/openvswitch"] != "enabled" {
		t.Errorf("metadata agent hostNetwork=%v nodeSelector=%v", pod.HostNetwork, pod.NodeSelector)
	}
	// metadata-agent.py: the proxy in the agent's process, its handler connected.
	checkPythonCommand(t, pod.Containers[0].Command, "from neutron.cmd.agents import ovn_metadata\nexcept ImportError as older:  # noqa: F841 (the module of the older release below)\n    # Zed: patches eventlet in first, as /usr/bin/neutron-ovn-metadata-agent does.\n    from neutron.cmd.eventlet.agents import ovn_metadata", "registry.publish(resources.PROCESS, events.AFTER_INIT",
		"--config-file /etc/neutron/neutron.conf --config-file /etc/neutron/neutron_ovn_metadata_agent.ini")
	if md := typed["Secret/neutron-config"].(*corev1.Secret).StringData["metadata_agent.ini"]; !strings.Contains(md, "metadata_workers = 0\n") || !strings.Contains(md, "use_helper_for_ns_read = false\n") ||
		!strings.Contains(md, "\n[agent]\nroot_helper = \n") {
		t.Errorf("metadata_agent.ini = %q, want metadata_workers = 0 (the proxy in the agent's process), use_helper_for_ns_read = false and an empty root_helper (the agent runs as root)", md)
	}
	// The agent is root: its privsep daemons start without sudo and neutron-rootwrap, each
	// privsep-helper reading the agent's configuration files.
	if md := typed["Secret/neutron-config"].(*corev1.Secret).StringData["metadata_agent.ini"]; strings.Count(md,
		"helper_command = privsep-helper --config-file /etc/neutron/neutron.conf --config-file /etc/neutron/neutron_ovn_metadata_agent.ini\n") != 3 ||
		!strings.Contains(md, "[privsep]\n") || !strings.Contains(md, "[privsep_namespace]\n") || !strings.Contains(md, "[privsep_link]\n") {
		t.Errorf("metadata_agent.ini = %q, want helper_command privsep-helper with the agent's files in [privsep], [privsep_namespace] and [privsep_link]", md)
	}
	var netns *corev1.VolumeMount
	for i, m := range pod.Containers[0].VolumeMounts {
		if m.Name == "netns" {
			netns = &pod.Containers[0].VolumeMounts[i]
		}
	}
	if netns == nil || netns.MountPath != "/run/netns" || netns.MountPropagation == nil || *netns.MountPropagation != corev1.MountPropagationBidirectional {
		t.Errorf("metadata agent /run/netns mount = %+v, want Bidirectional propagation", netns)
	}

	// The secrets: every reference is generated by deploy, config holds placeholders only.
	generated := map[string]bool{}
	for _, s := range deploy.DefaultSecrets() {
		for k := range s.Keys {
			generated[s.Name+"/"+k] = true
		}
	}
	for _, o := range []*corev1.PodSpec{&server.Spec.Template.Spec, &job.Spec.Template.Spec, &pod} {
		for _, c := range podContainers(*o) {
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && !generated[e.ValueFrom.SecretKeyRef.Name+"/"+e.ValueFrom.SecretKeyRef.Key] {
					t.Errorf("container %s env %s refers to %s/%s, not generated", c.Name, e.Name, e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
				}
			}
		}
	}
	conf := typed["Secret/neutron-config"].(*corev1.Secret).StringData
	for file, wants := range map[string][]string{
		"neutron.conf": {"core_plugin = ml2\n", "service_plugins = ovn-router,trunk\n", "transport_url = rabbit://neutron:@@NEUTRON_RABBITMQ_PASSWORD@@@rabbitmq.openstack.svc:5672/neutron\n",
			"connection = mysql+pymysql://neutron:@@NEUTRON_DB_PASSWORD@@@mariadb.openstack.svc/neutron\n", "[nova]\n", "password = @@NOVA_KEYSTONE_PASSWORD@@\n"},
		"ml2_conf.ini": {"mechanism_drivers = ovn\n", "tenant_network_types = geneve\n", "flat_networks = physnet1\n",
			"ovn_nb_connection = ssl:10.43.0.41:6641\n", "ovn_sb_connection = ssl:10.43.0.42:16642\n", "ovn_metadata_enabled = true\n",
			"ovn_nb_private_key = /etc/neutron/ovn-tls/tls.key\n", "ovn_nb_certificate = /etc/neutron/ovn-tls/tls.crt\n", "ovn_nb_ca_cert = /etc/neutron/ovn-tls/ca.crt\n",
			"ovn_sb_private_key = /etc/neutron/ovn-tls/tls.key\n", "ovn_sb_certificate = /etc/neutron/ovn-tls/tls.crt\n", "ovn_sb_ca_cert = /etc/neutron/ovn-tls/ca.crt\n"},
		"metadata_agent.ini": {"nova_metadata_host = nova-metadata.openstack.svc.cluster.local\n", "metadata_proxy_shared_secret = @@METADATA_SECRET@@\n", "ovsdb_connection = unix:/run/openvswitch/db.sock\n",
			"ovn_sb_connection = ssl:10.43.0.42:6642\n", "ovn_sb_private_key = /etc/ovn/chassis/chassis.key\n", "ovn_sb_certificate = /etc/ovn/chassis/chassis.crt\n", "ovn_sb_ca_cert = /etc/ovn/chassis/ca.crt\n"},
	} {
		for _, w := range wants {
			if !strings.Contains(conf[file], w) {
				t.Errorf("%s lacks %q:\n%s", file, w, conf[file])
			}
		}
	}
}

// checkPythonCommand: command is python3 -c PROGRAM ARGS, PROGRAM holds snippet and is
// valid Python, ARGS (space-joined) are args.
func checkPythonCommand(t *testing.T, command []string, snippet, snippet2, args string) {
	t.Helper()
	if len(command) < 3 || command[0] != "/usr/bin/python3" || command[1] != "-c" ||
		!strings.Contains(command[2], snippet) || !strings.Contains(command[2], snippet2) || strings.Join(command[3:], " ") != args {
		t.Errorf("command = %.300q, want /usr/bin/python3 -c a program with %q and %q, then %s", command, snippet, snippet2, args)
		return
	}
	cmd := exec.Command("python3", "-c", "import sys; compile(sys.stdin.read(), 'program', 'exec')")
	cmd.Stdin = strings.NewReader(command[2])
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the program of %s does not compile: %v\n%s", args, err, out)
	}
}

// hasMount reports whether c mounts volume at path.
func hasMount(c *corev1.Container, volume, path string) bool {
	for _, m := range c.VolumeMounts {
		if m.Name == volume && m.MountPath == path {
			return true
		}
	}
	return false
}

// hasHostPath reports whether volumes has volume as hostPath path.
func hasHostPath(volumes []corev1.Volume, volume, path string) bool {
	for _, v := range volumes {
		if v.Name == volume && v.HostPath != nil && v.HostPath.Path == path {
			return true
		}
	}
	return false
}

// servicePorts is a Service's ports as "name=port ...".
func servicePorts(svc *corev1.Service) string {
	var out []string
	for _, p := range svc.Spec.Ports {
		out = append(out, fmt.Sprintf("%s=%d", p.Name, p.Port))
	}
	return strings.Join(out, " ")
}

// hasSecretVolume reports whether volumes has volume from Secret secret.
func hasSecretVolume(volumes []corev1.Volume, volume, secret string) bool {
	for _, v := range volumes {
		if v.Name == volume && v.Secret != nil && v.Secret.SecretName == secret {
			return true
		}
	}
	return false
}
