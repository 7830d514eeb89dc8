package test

import (
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/api"
)

// The compute node test: the shared cloud is node 1; node 2 runs in network and mount
// namespaces of its own (its own Open vSwitch, libvirt, kubelet, containerd), connected to
// the host by a veth pair, and joins with the compute role. Both nodes are on the
// userspace OVS datapath here (no kernel module), so each puts the interface of that link
// into its tunnel bridge.
const (
	cnName   = "osdc-n2"
	cnHostIf = "osdc-h" // the host's end of the link to node 2
	cnNodeIf = "osdc-c" // node 2's end
	cnHostIP = "10.98.0.1"
	cnNodeIP = "10.98.0.2"
)

func init() { registerE2E("compute-node", stageCheck, checkComputeNode) }

// figures are what make cluster-e2e prints.
type figures struct{ lines []string }

func (f *figures) add(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	f.lines = append(f.lines, line)
	t.Logf("figure: %s", line)
}

// checkComputeNode: node 2 joins the cloud with the compute role and gets the images of
// its role from node 1; its nova-compute, ovn-controller and metadata agent run there and
// nothing of the control plane; its chassis registers its own Geneve endpoint while router
// ports stay on node 1, the gateway. A server on each node gets its address from OVN DHCP,
// reads its uuid from the metadata service; node 2's server answers on its floating IP
// from the host, and it and node 1's server ping each other across the tunnel (round trips
// compared with two servers' on the same node). Maintenance on node 2 sends
// the next server to node 1, off lets node 2 take servers again. Removing node 2 leaves no
// compute service, hypervisor, resource provider or chassis behind; node 2 reset joins
// again under its name and comes back cleanly; removed again, the cloud is as before.
func checkComputeNode(t *testing.T, n *node) {
	requireCluster(t)
	for _, tool := range []string{"ssh", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not installed (test/deps.sh installs it): %v", tool, err)
		}
	}
	f := &figures{}
	defer func() { t.Logf("compute node figures:\n  %s", strings.Join(f.lines, "\n  ")) }()
	node1 := hostNodeName(t, n)
	// Node 2 gets private copies of what two nodes on one host would share: Nova's
	// instance files and the cloud's state volumes (the metadata agent's).
	n2 := newNSNode(t, n.bin, cnName, cnNodeIP, "/var/lib/nova", filepath.Join(n.stateDir, "volumes"))
	connectToHost(t, n2)
	tunnelOnHost(t, n)
	n2.start()
	t.Cleanup(func() { removeIfMember(t, n, n2) })
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(computeDiagnostics(n, n2))
		}
	})

	joinCompute(t, n, n2, f, "first join (images fetched from node 1)")
	if t.Failed() {
		return
	}
	t.Run("the node as the cluster shows it", func(t *testing.T) { checkComputeMember(t, n, node1) })
	t.Run("the compute node's kubelet reads only its pods' Secrets", func(t *testing.T) { checkComputeSecrets(t, n, n2) })
	t.Run("the compute node reaches no control-only port", func(t *testing.T) { checkComputeFirewall(t, n, n2) })
	t.Run("servers on both nodes talk across the tunnel", func(t *testing.T) { checkCrossNode(t, n, n2, node1, f) })
	t.Run("maintenance", func(t *testing.T) { checkMaintenance(t, n, node1) })
	t.Run("a node holding state is not removed", func(t *testing.T) { checkStateRefusal(t, n) })
	t.Run("remove leaves nothing stale", func(t *testing.T) { removeCompute(t, n, n2) })
	t.Run("reset and join again under the same name", func(t *testing.T) {
		resetNode2(t, n2)
		n2.start()
		joinCompute(t, n, n2, f, "join again after osd reset")
		if t.Failed() {
			return
		}
		checkOneOfEach(t, n)
		removeCompute(t, n, n2)
	})
}

// hostNodeName is the shared cloud's Kubernetes node name (its nova-compute host).
func hostNodeName(t *testing.T, n *node) string {
	t.Helper()
	info, err := n.info()
	if err != nil || info.Kubernetes.NodeName == "" {
		t.Fatalf("GET /1.0 on the cloud = %+v, %v, want its node name", info, err)
	}
	return info.Kubernetes.NodeName
}

// connectToHost links node 2's network namespace to the host with a veth pair: the host
// end cnHostIP, node 2's end cnNodeIP with its default route through the host.
func connectToHost(t *testing.T, n2 *nsNode) {
	t.Helper()
	t.Cleanup(func() { exec.Command("ip", "link", "del", cnHostIf).Run() })
	for _, args := range [][]string{
		{"link", "add", cnHostIf, "type", "veth", "peer", "name", cnNodeIf},
		{"link", "set", cnNodeIf, "netns", strconv.Itoa(n2.holder.Process.Pid)},
		{"addr", "add", cnHostIP + "/24", "dev", cnHostIf},
		{"link", "set", cnHostIf, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v\n%s", args, err, out)
		}
	}
	script := fmt.Sprintf("set -e; ip addr add %s/24 dev %s; ip link set %s up; ip route add default via %s", cnNodeIP, cnNodeIf, cnNodeIf, cnHostIP)
	if out, err := n2.nsenter("sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("address node 2: %v\n%s", err, out)
	}
	if out, err := n2.nsenter("ping", "-c", "1", "-W", "5", cnHostIP).CombinedOutput(); err != nil {
		t.Fatalf("node 2 cannot reach the host: %v\n%s", err, out)
	}
}

// tunnelOnHost makes the host's end of the link node 1's tunnel interface (osd init
// --tunnel-interface): on the userspace datapath it moves into br-phy with its address,
// which becomes node 1's Geneve endpoint. The cleanup takes it back (--tunnel-interface none).
func tunnelOnHost(t *testing.T, n *node) {
	t.Helper()
	t.Cleanup(func() {
		if out, err := n.osd("init", "--tunnel-interface", "none", "--timeout", "15m"); err != nil {
			t.Errorf("osd init --tunnel-interface none: %v\n%s", err, out)
		}
		if out, _ := exec.Command("ip", "-br", "link", "show", "br-phy").CombinedOutput(); !strings.Contains(string(out), "does not exist") {
			t.Errorf("br-phy after osd init --tunnel-interface none: %s, want it gone", out)
		}
		if out, _ := exec.Command("ip", "-br", "addr", "show", cnHostIf).CombinedOutput(); !strings.Contains(string(out), cnHostIP) {
			t.Errorf("%s after osd init --tunnel-interface none: %s, want %s back", cnHostIf, out, cnHostIP)
		}
	})
	out, err := n.osd("init", "--tunnel-interface", cnHostIf, "--timeout", "15m")
	if err != nil {
		t.Fatalf("osd init --tunnel-interface %s: %v\n%s", cnHostIf, err, out)
	}
	if out, _ := exec.Command("ip", "-br", "addr", "show", "br-phy").CombinedOutput(); !strings.Contains(string(out), cnHostIP) {
		t.Fatalf("br-phy after osd init --tunnel-interface %s: %s, want %s on it", cnHostIf, out, cnHostIP)
	}
	if out, _ := exec.Command("ovs-vsctl", "get", "open", ".", "external_ids:ovn-encap-ip").CombinedOutput(); strings.Trim(strings.TrimSpace(string(out)), `"`) != cnHostIP {
		t.Errorf("host Open vSwitch ovn-encap-ip = %s, want %s", out, cnHostIP)
	}
}

// joinCompute issues a compute token for node 2, joins it and waits until its nova-compute
// is up in Nova; it records how long that took.
func joinCompute(t *testing.T, n *node, n2 *nsNode, f *figures, what string) {
	t.Helper()
	out, err := n.osd("cluster", "add", cnName, "--role", "compute", "--ttl", "1h")
	if err != nil {
		t.Fatalf("osd cluster add: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	token := lines[len(lines)-1]
	t0 := time.Now()
	out, err = n2.osd(15*time.Minute, "join", "--token-file", writeSecret(t, token), "--timeout", "14m")
	joined := time.Since(t0)
	if err != nil {
		t.Fatalf("osd join on node 2: %v\n%s", err, out)
	}
	t.Logf("osd join on node 2 (%s):\n%s", what, out)
	var up time.Duration
	for deadline := time.Now().Add(6 * time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		out, err := n.openstack("compute", "service", "list", "--service", "nova-compute", "--host", cnName, "-f", "value", "-c", "State")
		if err == nil && strings.TrimSpace(out) == "up" {
			up = time.Since(t0)
			break
		}
	}
	if up == 0 {
		pods, _ := n.kubectl("get", "pods", "-A", "-o", "wide", "--field-selector", "spec.nodeName="+cnName)
		t.Fatalf("nova-compute on %s not up in Nova 6 minutes after the join; its pods:\n%s", cnName, pods)
	}
	// A server can be asked of the node once Nova has mapped it to cell1 (the scheduler's
	// periodic discovery, every 10 s): until then it answers "Host ... is not mapped to
	// any cell". Nova lists a hypervisor only once its host is mapped.
	var mapped time.Duration
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		out, err := n.openstack("hypervisor", "list", "-f", "value", "-c", "Hypervisor Hostname")
		if err == nil && slices.Contains(strings.Fields(out), cnName) {
			mapped = time.Since(t0)
			break
		}
	}
	if mapped == 0 {
		t.Fatalf("%s up in Nova but not mapped to a cell (not in openstack hypervisor list) 2 minutes later: the scheduler's discover_hosts_in_cells_interval is 10 s", cnName)
	}
	f.add(t, "%s: token to joined member %.1f s, to nova-compute up in Nova %.1f s, to its host mapped (servers can be asked of it) %.1f s", what, joined.Seconds(), up.Seconds(), mapped.Seconds())
}

// member is node 2's or node 1's entry in osd cluster list on the cloud.
func member(t *testing.T, n *node, name string) api.Member {
	t.Helper()
	out, err := n.osd("cluster", "list", "--format", "json")
	if err != nil {
		t.Fatalf("osd cluster list: %v\n%s", err, out)
	}
	var ms []api.Member
	if err := json.Unmarshal([]byte(out), &ms); err != nil {
		t.Fatalf("osd cluster list: %v\n%s", err, out)
	}
	for _, m := range ms {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("osd cluster list has no %s:\n%s", name, out)
	return api.Member{}
}

// checkComputeMember: osd cluster list shows node 2 Ready with the compute role, its own
// Geneve endpoint, its images current; node 1 with its endpoint on the link and the state
// it holds; osd status says where the state is. Node 2 runs the pods of its role and none
// other (its taint), and the router's gateway port is on node 1.
func checkComputeMember(t *testing.T, n *node, node1 string) {
	var m2 api.Member
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Second) {
		if m2 = member(t, n, cnName); m2.Images == "current" && m2.Tunnel != "" {
			break
		}
	}
	if m2.NodeState != api.NodeReady || !slices.Equal(m2.Roles, []string{"compute"}) || m2.Tunnel != "geneve "+cnNodeIP || m2.Images != "current" || len(m2.State) != 0 {
		t.Errorf("osd cluster list: %s = %+v, want Ready, compute, tunnel geneve %s, images current, no state", cnName, m2, cnNodeIP)
	}
	m1 := member(t, n, node1)
	if m1.Tunnel != "geneve "+cnHostIP || !slices.Contains(m1.State, "mariadb") || !slices.Contains(m1.State, "ovn") || m1.Images != "current" {
		t.Errorf("osd cluster list: %s = %+v, want tunnel geneve %s, images current, holding mariadb and ovn", node1, m1, cnHostIP)
	}
	out, _ := n.osd("cluster", "list")
	t.Logf("osd cluster list:\n%s", out)
	if out, err := n.osd("status"); err != nil || !strings.Contains(out, "state on "+node1) {
		t.Errorf("osd status = %v, want a line saying the state is on %s:\n%s", err, node1, out)
	}
	out, err := n.kubectl("get", "pods", "-A", "--field-selector", "spec.nodeName="+cnName, "-o", "jsonpath={range .items[*]}{.metadata.name} {.status.phase}{\"\\n\"}{end}")
	if err != nil {
		t.Fatalf("kubectl get pods: %v\n%s", err, out)
	}
	var running []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		name, phase, _ := strings.Cut(l, " ")
		running = append(running, strings.Join(strings.Split(name, "-")[:len(strings.Split(name, "-"))-1], "-")+"="+phase)
	}
	slices.Sort(running)
	if want := []string{"neutron-ovn-metadata-agent=Running", "nova-compute=Running", "ovn-controller=Running"}; !slices.Equal(running, want) {
		t.Errorf("pods on %s = %v, want %v (the compute role's, nothing of the control plane)", cnName, running, want)
	}
	sb := sbctl(t, n, "show")
	if !strings.Contains(sb, "hostname: "+cnName) || !strings.Contains(sb, `ip: "`+cnNodeIP+`"`) || !strings.Contains(sb, `ip: "`+cnHostIP+`"`) {
		t.Errorf("ovn-sbctl show lacks a chassis on each node with its own endpoint:\n%s", sb)
	}
	if gw := gatewayHost(t, n); gw != node1 {
		t.Errorf("the router's gateway port is on %q, want %s (the only node with the gateway role)", gw, node1)
	}
}

// sbctl runs ovn-sbctl in the OVN databases' pod.
func sbctl(t *testing.T, n *node, args ...string) string {
	t.Helper()
	out, err := n.kubectl(append([]string{"-n", "openstack", "exec", "deploy/ovn-central", "-c", "northd", "--", "ovn-sbctl", "--db=unix:/run/ovn/ovnsb_db.sock"}, args...)...)
	if err != nil {
		t.Fatalf("ovn-sbctl %v: %v\n%s", args, err, out)
	}
	return out
}

// gatewayHost is the hostname of the chassis that holds the router's gateway port.
func gatewayHost(t *testing.T, n *node) string {
	t.Helper()
	ch := strings.Fields(sbctl(t, n, "--bare", "--columns=chassis", "find", "Port_Binding", "type=chassisredirect"))
	if len(ch) == 0 {
		return ""
	}
	return strings.TrimSpace(sbctl(t, n, "--bare", "--columns=hostname", "list", "Chassis", ch[0]))
}

// guest is one test server.
type guest struct{ name, id, ip, host string }

// bootOn boots a server on host (nova:HOST) with osd's key and waits for its DHCP lease and
// its uuid from the metadata service on its console; without them it logs the state of the
// server's port in Neutron, OVN and on host (in runs a command in host's namespaces) while
// the server still runs.
func bootOn(t *testing.T, n *node, name, host string, in func(args ...string) *exec.Cmd) (guest, time.Duration) {
	t.Helper()
	remade := brIntRemade(t, in)
	t0 := time.Now()
	var id string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Second) {
		// A new compute host is mapped to its cell within 30 s (the scheduler's periodic task).
		out, err := n.openstack("server", "create", "--flavor", "m1.tiny", "--image", "osd-test", "--network", "osd-net", "--key-name", "osd-key",
			"--availability-zone", "nova:"+host, "--wait", "-f", "value", "-c", "id", name)
		id = strings.TrimSpace(out)
		if err == nil || !strings.Contains(out, "not mapped to any cell") || time.Now().After(deadline) {
			t.Cleanup(func() { n.openstack("server", "delete", "--wait", name) })
			if err != nil || !uuidRE.MatchString(id) {
				fault, _ := n.openstack("server", "show", name, "-f", "value", "-c", "status", "-c", "fault")
				t.Fatalf("server create %s on %s: %v\n%s\nserver: %s", name, host, err, out, fault)
			}
			break
		}
	}
	took := time.Since(t0)
	g := guest{name: name, id: id, host: n.field(t, "server", "show", id, "-f", "value", "-c", "OS-EXT-SRV-ATTR:host")}
	m := fixedIPRE.FindStringSubmatch(n.field(t, "server", "show", id, "-f", "value", "-c", "addresses"))
	if m == nil || g.host != host {
		t.Fatalf("server %s: host %s, addresses %v, want on %s with an address on osd-net", name, g.host, m, host)
	}
	g.ip = m[1]
	console := n.waitConsole(t, id, 4*time.Minute, "osd-guest: metadata uuid "+id, "osd-guest: metadata unreachable")
	if !strings.Contains(console, "osd-guest: eth0 "+g.ip+"/") || !strings.Contains(console, "osd-guest: metadata uuid "+id) {
		t.Logf("server %s on %s without its lease or metadata: its network as it is now:\n%s", name, host, serverNetDiagnostics(n, in, host, id))
		t.Fatalf("server %s on %s: console lacks its OVN DHCP lease %s or its uuid from the metadata service:\n%s", name, host, g.ip, tail(console, 30))
	}
	checkPlugKeptBrInt(t, n, in, id, remade)
	return g, took
}

// rttRE reads iputils ping's summary: the loss in percent and the average round trip.
var rttRE = regexp.MustCompile(`(?s) ([0-9]+)% packet loss.*rtt min/avg/max/mdev = [0-9.]+/([0-9.]+)/`)

// metadataPing pings addr from the metadata namespace netns of a node (inNode runs a
// command in that node's namespaces): a port on the tenant network, on that node's chassis
// (see pingRTT).
func metadataPing(t *testing.T, inNode func(args ...string) *exec.Cmd, netns, from, addr string, diag func() string) float64 {
	t.Helper()
	return pingRTT(t, fmt.Sprintf("ping %s from the metadata port on %s", addr, from), time.Minute, func(count string) *exec.Cmd {
		return inNode("ip", "netns", "exec", netns, "ping", "-c", count, "-i", "0.2", "-W", "2", "-q", addr)
	}, diag)
}

// hostPing pings a floating IP from the host (see pingRTT).
func hostPing(t *testing.T, what, fip string, diag func() string) float64 {
	t.Helper()
	return pingRTT(t, fmt.Sprintf("ping %s on its floating IP %s from the host", what, fip), 3*time.Minute, func(count string) *exec.Cmd {
		return exec.Command("ping", "-c", count, "-i", "0.2", "-W", "2", "-q", fip)
	}, diag)
}

// pingRTT runs ping(count) until one packet comes back within wait (the first packets may
// go while a neighbour or the floating IP's flows are set up), then sends 20 more, at most
// 2 of them lost, and returns their average round trip. If nothing answers, the test
// fails with diag (the network of both nodes) and 0.
func pingRTT(t *testing.T, what string, wait time.Duration, ping func(count string) *exec.Cmd, diag func() string) float64 {
	t.Helper()
	var out []byte
	var err error
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(time.Second) {
		if out, err = ping("1").CombinedOutput(); err == nil {
			break
		}
	}
	if err == nil {
		out, err = ping("20").CombinedOutput()
	}
	loss, avg, ok := rttSummary(rttRE, string(out))
	return judgePing(t, what, string(out), fmt.Sprint(err), loss, avg, ok, diag)
}

// rttSummary reads a ping summary with re, whose groups are the loss in percent and the
// average round trip in ms; ok is false when out has no such summary (nothing came back).
func rttSummary(re *regexp.Regexp, out string) (loss int, avg float64, ok bool) {
	m := re.FindStringSubmatch(out)
	if m == nil {
		return 0, 0, false
	}
	loss, _ = strconv.Atoi(m[1])
	avg, err := strconv.ParseFloat(m[2], 64)
	return loss, avg, err == nil
}

// judgePing fails the test when a ping of 20 echoes has no summary (ok false: cause says
// why, diag shows the network of both nodes) or lost more than 2 of them; it returns the
// average round trip, 0 when there is none.
func judgePing(t *testing.T, what, out, cause string, loss int, avg float64, ok bool, diag func() string) float64 {
	t.Helper()
	if !ok {
		t.Logf("%s failed: the network of both nodes now:\n%s", what, diag())
		t.Errorf("%s: %s\n%s", what, cause, out)
		return 0
	}
	if loss > 10 {
		t.Errorf("%s lost %d%% of 20 packets, want at most 10%%:\n%s", what, loss, out)
	}
	return avg
}

// guestTCP logs in to g over SSH as osd (from the metadata namespace netns of g's node: no
// tunnel on the way in), which must work, and from g connects to the SSH server of other,
// on the other node; it reports whether other's banner came back across the tunnel.
func guestTCP(t *testing.T, n *node, inNode func(args ...string) *exec.Cmd, netns string, g, other guest) bool {
	t.Helper()
	out, ok := inGuest(n, inNode, netns, g, "nc -w 10 "+other.ip+" 22 </dev/null")
	if !ok {
		t.Errorf("ssh osd@%s (%s, on %s) from its node's metadata namespace: %s", g.ip, g.name, g.host, out)
	}
	return strings.Contains(out, "SSH-2.0-")
}

// inGuest logs in to g over SSH as osd from the metadata namespace netns of g's node
// (inNode runs a command in that node's namespaces) and runs command there, trying the
// login for 2 minutes; it returns the output and whether the login worked.
func inGuest(n *node, inNode func(args ...string) *exec.Cmd, netns string, g guest, command string) (string, bool) {
	ssh := []string{"timeout", "90", "ip", "netns", "exec", netns, "ssh", "-i", filepath.Join(n.stateDir, "osd-key"), "-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=10", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "osd@" + g.ip,
		"echo logged in as $(id -un); " + command}
	var out []byte
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(3 * time.Second) {
		if out, _ = inNode(ssh...).CombinedOutput(); strings.Contains(string(out), "logged in as osd") {
			return string(out), true
		}
	}
	return string(out), false
}

// busyboxRTTRE reads busybox ping's summary: the loss in percent and the average round
// trip (busybox prints "round-trip min/avg/max", iputils "rtt min/avg/max/mdev").
var busyboxRTTRE = regexp.MustCompile(`([0-9]+)% packet loss\s+round-trip min/avg/max = [0-9.]+/([0-9.]+)/[0-9.]+ ms`)

// busyboxRTT is the loss in percent and the average round trip in ms of busybox ping's
// output, ok false when it has no summary with round trips (nothing came back).
func busyboxRTT(out string) (loss int, avg float64, ok bool) { return rttSummary(busyboxRTTRE, out) }

// guestPing logs in to g (see inGuest) and pings other's fixed address from there: one
// echo at a time for up to 30 s until one comes back, then 20, at most 2 of them lost. It
// returns their average round trip; if the guest cannot reach other, the test fails with
// the output and diag (the tunnel and both nodes' datapaths), and 0.
func guestPing(t *testing.T, n *node, inNode func(args ...string) *exec.Cmd, netns string, g, other guest, diag func() string) float64 {
	t.Helper()
	command := fmt.Sprintf("i=0; until ping -c 1 -W 1 %[1]s >/dev/null 2>&1 || [ $i -ge 30 ]; do i=$((i+1)); done; ping -c 20 -i 0.2 -W 2 -q %[1]s", other.ip)
	out, ok := inGuest(n, inNode, netns, g, command)
	what := fmt.Sprintf("ping %s (%s, on %s) from %s (on %s) over SSH", other.ip, other.name, other.host, g.name, g.host)
	loss, avg, got := busyboxRTT(out)
	return judgePing(t, what, out, fmt.Sprintf("login %v, output:", ok), loss, avg, ok && got, diag)
}

// checkCrossNode boots a server on node 2 and two on node 1. Each node's metadata port (a
// namespace on the tenant network, on that node's chassis) pings the server on its own
// node: a metadata port is an OVN localport, present on every chassis, whose traffic OVN
// never sends through a tunnel, so it reaches only its own node's guests. Across the
// tunnel: each server gets a floating IP that the host pings. Node 1 is the gateway (its
// chassis holds the router's gateway port), so the echo to node 2's server and its reply
// cross the Geneve tunnel between the chassis and the one to node 1's server does not; the
// round trips are compared. Inside the guests (over SSH from their node's metadata port),
// node 1's server and node 2's ping each other across the tunnel, and node 1's two servers
// each other on the node: the round trips are compared. Whether TCP from one guest reaches
// the other across the tunnel is recorded, not required: on the userspace datapath, Open
// vSwitch 3.1 drops packets whose checksum is left to offload (a virtio guest's TCP) at
// the tunnel (docs/networking.md: the limit of the userspace datapath).
func checkCrossNode(t *testing.T, n *node, n2 *nsNode, node1 string, f *figures) {
	onHost := func(args ...string) *exec.Cmd { return exec.Command(args[0], args[1:]...) }
	vm2, took2 := bootOn(t, n, "ce2e-node2", cnName, n2.nsenter)
	vm1, took1 := bootOn(t, n, "ce2e-node1", node1, onHost)
	f.add(t, "server create to ACTIVE: on node 2 %.1f s, on node 1 %.1f s (ratio %.2f)", took2.Seconds(), took1.Seconds(), took2.Seconds()/took1.Seconds())
	vm1b, _ := bootOn(t, n, "ce2e-node1b", node1, onHost) // the same-node peer of vm1
	netns := "ovnmeta-" + n.field(t, "network", "show", "osd-net", "-f", "value", "-c", "id")
	nodes := map[string]func(args ...string) *exec.Cmd{node1: onHost, cnName: n2.nsenter}
	meta1 := metadataPing(t, onHost, netns, "node 1", vm1.ip, func() string { return tunnelDiagnostics(n, nodes, node1, netns, vm1, nil) })
	meta2 := metadataPing(t, n2.nsenter, netns, "node 2", vm2.ip, func() string { return tunnelDiagnostics(n, nodes, cnName, netns, vm2, nil) })
	fips := map[string]string{}
	for _, g := range []guest{vm1, vm2} {
		fip := n.field(t, "floating", "ip", "create", "external", "-f", "value", "-c", "floating_ip_address")
		t.Cleanup(func() { n.openstack("floating", "ip", "delete", fip) })
		if out, err := n.openstack("server", "add", "floating", "ip", g.id, fip); err != nil {
			t.Fatalf("add floating ip to %s: %v\n%s", g.name, err, out)
		}
		fips[g.id] = fip
	}
	across := hostPing(t, "node 2's server", fips[vm2.id], func() string {
		return tunnelDiagnostics(n, nodes, node1, netns, vm2, func() ([]byte, error) {
			return exec.Command("ping", "-c", "3", "-W", "2", fips[vm2.id]).CombinedOutput()
		})
	})
	local := hostPing(t, "node 1's server", fips[vm1.id], func() string { return tunnelDiagnostics(n, nodes, node1, netns, vm1, nil) })
	f.add(t, "ping RTT from the host to a floating IP (node 1 the gateway): node 2's server (across Geneve) %.3f ms, node 1's server %.3f ms (ratio %.2f); each node's metadata port to its own server: node 1 %.3f ms, node 2 %.3f ms",
		across, local, across/local, meta1, meta2)
	// Guest to guest over the tenant network: across the tunnel both ways, and between two
	// guests on node 1 for comparison.
	pingDiag := func(from string, target guest) func() string {
		return func() string { return tunnelDiagnostics(n, nodes, from, netns, target, nil) }
	}
	g12 := guestPing(t, n, onHost, netns, vm1, vm2, pingDiag(node1, vm2))
	g21 := guestPing(t, n, n2.nsenter, netns, vm2, vm1, pingDiag(cnName, vm1))
	g11 := guestPing(t, n, onHost, netns, vm1, vm1b, pingDiag(node1, vm1b))
	f.add(t, "ping RTT guest to guest on the tenant network (20 echoes, busybox ping in the guest): node 1 to node 2 (across Geneve) %.3f ms, node 2 to node 1 %.3f ms; two guests on node 1 %.3f ms (ratio across/same node %.2f)",
		g12, g21, g11, (g12+g21)/2/g11)
	carried := map[bool]string{true: "carried", false: "not carried"}
	f.add(t, "TCP from guest to guest across the tunnel: node 1 to node 2 %s, node 2 to node 1 %s",
		carried[guestTCP(t, n, onHost, netns, vm1, vm2)], carried[guestTCP(t, n, n2.nsenter, netns, vm2, vm1)])
	if t.Failed() {
		return
	}
	for _, g := range []guest{vm1, vm1b, vm2} {
		if out, err := n.openstack("server", "delete", "--wait", g.id); err != nil {
			t.Errorf("server delete %s: %v\n%s", g.name, err, out)
		}
	}
}

// checkMaintenance: with maintenance on node 2, it shows in osd cluster list, its
// nova-compute is disabled and its node cordoned: a server without a host goes to node 1
// and one asked of node 2 finds no valid host; off, node 2 takes a server again.
func checkMaintenance(t *testing.T, n *node, node1 string) {
	if out, err := n.osd("cluster", "maintenance", cnName, "on"); err != nil {
		t.Fatalf("osd cluster maintenance %s on: %v\n%s", cnName, err, out)
	}
	if m := member(t, n, cnName); !m.Maintenance {
		t.Errorf("osd cluster list after maintenance on: %+v, want maintenance", m)
	}
	if st := n.field(t, "compute", "service", "list", "--service", "nova-compute", "--host", cnName, "-f", "value", "-c", "Status"); st != "disabled" {
		t.Errorf("nova-compute on %s is %s in maintenance, want disabled", cnName, st)
	}
	if out, _ := n.kubectl("get", "node", cnName, "-o", "jsonpath={.spec.unschedulable}"); out != "true" {
		t.Errorf("node %s unschedulable = %q in maintenance, want true", cnName, out)
	}
	out, err := n.openstack("server", "create", "--flavor", "m1.tiny", "--image", "osd-test", "--network", "osd-net", "--wait", "-f", "value", "-c", "id", "ce2e-maint")
	t.Cleanup(func() { n.openstack("server", "delete", "--wait", "ce2e-maint") })
	if err != nil {
		t.Fatalf("server create during maintenance: %v\n%s", err, out)
	}
	if host := n.field(t, "server", "show", "ce2e-maint", "-f", "value", "-c", "OS-EXT-SRV-ATTR:host"); host != node1 {
		t.Errorf("a server created while %s is in maintenance landed on %s, want %s", cnName, host, node1)
	}
	n.openstack("server", "delete", "--wait", "ce2e-maint")
	byHost := func(name string) (string, error) {
		out, err := n.openstack("--os-compute-api-version", "2.74", "server", "create", "--flavor", "m1.tiny", "--image", "osd-test", "--network", "osd-net",
			"--host", cnName, "-f", "value", "-c", "id", name)
		t.Cleanup(func() { n.openstack("server", "delete", "--wait", name) })
		if err != nil {
			return "", fmt.Errorf("server create --host %s: %w\n%s", cnName, err, out)
		}
		return strings.TrimSpace(out), nil
	}
	id, err := byHost("ce2e-maint-host")
	if err != nil {
		t.Fatal(err)
	}
	if err := n.waitStatus(id, "ACTIVE", 3*time.Minute); err == nil || !strings.Contains(err.Error(), "No valid host") {
		t.Errorf("a server asked of %s in maintenance: %v, want ERROR with no valid host", cnName, err)
	}
	n.openstack("server", "delete", "--wait", id)
	if out, err := n.osd("cluster", "maintenance", cnName, "off"); err != nil {
		t.Fatalf("osd cluster maintenance %s off: %v\n%s", cnName, err, out)
	}
	if m := member(t, n, cnName); m.Maintenance {
		t.Errorf("osd cluster list after maintenance off: %+v, want no maintenance", m)
	}
	if id, err = byHost("ce2e-after-maint"); err != nil {
		t.Fatal(err)
	}
	if err := n.waitStatus(id, "ACTIVE", 4*time.Minute); err != nil {
		t.Errorf("a server asked of %s after maintenance off: %v", cnName, err)
	}
	n.openstack("server", "delete", "--wait", id)
}

// checkStateRefusal records node 2 as the holder of a stateful release that is not
// deployed (Ceph's, as the daemon records where one is first placed): removing node 2 is
// then refused, naming it, and nothing changes; the record is taken back.
func checkStateRefusal(t *testing.T, n *node) {
	if _, err := n.kubectl("get", "configmap", "-n", "kube-system", "osd-state-placement", "-o", "jsonpath={.data.ceph}"); err != nil {
		t.Fatalf("the placement record: %v", err)
	}
	patch := func(v string) {
		t.Helper()
		if out, err := n.kubectl("patch", "configmap", "-n", "kube-system", "osd-state-placement", "--type", "merge", "-p", `{"data":{"ceph":`+v+`}}`); err != nil {
			t.Fatalf("patch the placement record: %v\n%s", err, out)
		}
	}
	patch(`"` + cnName + `"`)
	defer patch("null")
	out, err := n.osd("cluster", "remove", cnName, "--force")
	if err == nil || !strings.Contains(out, cnName+" holds the data of ceph") {
		t.Errorf("osd cluster remove --force of a node holding state = %v:\n%s\nwant a refusal naming ceph", err, out)
	}
	if m := member(t, n, cnName); m.NodeState != api.NodeReady || !slices.Equal(m.State, []string{"ceph"}) {
		t.Errorf("after the refused removal: %+v, want %s still a Ready member, holding ceph", m, cnName)
	}
}

// removeCompute removes node 2 (no servers on it) and checks that nothing of it stays in
// Nova, Placement, OVN or Kubernetes, and that its daemon stops.
func removeCompute(t *testing.T, n *node, n2 *nsNode) {
	t.Helper()
	if out, err := n.osd("cluster", "remove", cnName); err != nil {
		t.Fatalf("osd cluster remove %s: %v\n%s", cnName, err, out)
	}
	for what, args := range map[string][]string{
		"compute service": {"compute", "service", "list", "-f", "value", "-c", "Host"},
		"hypervisor":      {"hypervisor", "list", "-f", "value", "-c", "Hypervisor Hostname"},
	} {
		if out, err := n.openstack(args...); err != nil || strings.Contains(out, cnName) {
			t.Errorf("%s list after removal = %v:\n%s\nwant no %s", what, err, out, cnName)
		}
	}
	if rps := resourceProviders(t, n); slices.Contains(rps, cnName) {
		t.Errorf("resource providers after removal: %v, want no %s", rps, cnName)
	}
	if sb := sbctl(t, n, "show"); strings.Contains(sb, cnName) || strings.Contains(sb, cnNodeIP) {
		t.Errorf("ovn-sbctl show after removal still has %s:\n%s", cnName, sb)
	}
	if out, err := n.kubectl("get", "node", cnName); err == nil || !strings.Contains(out, "NotFound") {
		t.Errorf("kubectl get node %s after removal = %q, %v, want NotFound", cnName, out, err)
	}
	select {
	case <-n2.exited:
	case <-time.After(3 * time.Minute):
		t.Errorf("node 2's daemon still runs 3 minutes after its removal")
	}
	n2.daemon = nil
}

// removeIfMember removes node 2 at cleanup when a failed test left it a member.
func removeIfMember(t *testing.T, n *node, n2 *nsNode) {
	if out, _ := n.osd("cluster", "list"); !strings.Contains(out, cnName) {
		return
	}
	if out, err := n.osd("cluster", "remove", cnName, "--force"); err != nil {
		t.Errorf("cleanup: osd cluster remove %s --force: %v\n%s", cnName, err, out)
	}
}

// resetNode2 runs osd reset on the removed node 2: its link gets its address back.
func resetNode2(t *testing.T, n2 *nsNode) {
	t.Helper()
	out, err := n2.osd(5*time.Minute, "reset", "--yes")
	if err != nil {
		t.Fatalf("osd reset on node 2: %v\n%s", err, out)
	}
	if out, _ := n2.nsenter("ip", "-br", "addr", "show", cnNodeIf).CombinedOutput(); !strings.Contains(string(out), cnNodeIP) {
		t.Fatalf("node 2's %s after osd reset: %s, want %s back", cnNodeIf, out, cnNodeIP)
	}
}

// checkOneOfEach: node 2, back under its name, has one compute service, one hypervisor,
// one resource provider and one chassis, all up.
func checkOneOfEach(t *testing.T, n *node) {
	t.Helper()
	count := func(out string) int { return strings.Count(out, cnName) }
	if out, _ := n.openstack("compute", "service", "list", "-f", "value", "-c", "Host", "-c", "State"); count(out) != 1 || !strings.Contains(out, cnName+" up") {
		t.Errorf("compute services after the second join:\n%s\nwant one of %s, up", out, cnName)
	}
	if rps := resourceProviders(t, n); len(slices.DeleteFunc(slices.Clone(rps), func(s string) bool { return s != cnName })) != 1 {
		t.Errorf("resource providers after the second join: %v, want one %s", rps, cnName)
	}
	if sb := sbctl(t, n, "--bare", "--columns=hostname", "list", "Chassis"); count(sb) != 1 {
		t.Errorf("chassis after the second join:\n%s\nwant one of %s", sb, cnName)
	}
}

// resourceProviders lists Placement's resource provider names (through its API: the host
// has no osc-placement plugin).
func resourceProviders(t *testing.T, n *node) []string {
	t.Helper()
	token := n.field(t, "token", "issue", "-f", "value", "-c", "id")
	url := n.field(t, "endpoint", "list", "--service", "placement", "--interface", "public", "-f", "value", "-c", "URL")
	out, err := exec.Command("curl", "-sf", "--max-time", "30", "-H", "X-Auth-Token: "+token, "-H", "OpenStack-API-Version: placement 1.14",
		strings.TrimRight(url, "/")+"/resource_providers").Output()
	if err != nil {
		t.Fatalf("GET %s/resource_providers: %v\n%s", url, err, out)
	}
	var body struct {
		Providers []struct {
			Name string `json:"name"`
		} `json:"resource_providers"`
	}
	if err := json.Unmarshal(out, &body); err != nil {
		t.Fatalf("resource providers: %v\n%s", err, out)
	}
	var names []string
	for _, p := range body.Providers {
		names = append(names, p.Name)
	}
	return names
}

// computeDiagnostics is what a failure needs to be understood: the pods, node 2's pods'
// logs, both nodes' Open vSwitch (bridges, tunnel routes and neighbours) and addresses,
// and the OVN chassis.
func computeDiagnostics(n *node, n2 *nsNode) string {
	var b strings.Builder
	run := func(what string, cmd *exec.Cmd) {
		out, err := cmd.CombinedOutput()
		fmt.Fprintf(&b, "--- %s (%v)\n%s\n", what, err, tail(string(out), 60))
	}
	osd := func(args ...string) *exec.Cmd { return exec.Command(n.bin, append(n.globalArgs(), args...)...) }
	run("pods", osd("kubectl", "get", "pods", "-A", "-o", "wide"))
	run("pods on node 2", osd("kubectl", "get", "pods", "-A", "-o", "wide", "--field-selector", "spec.nodeName="+cnName))
	for _, sel := range []string{"app.kubernetes.io/instance=nova,app.kubernetes.io/component=compute", "app.kubernetes.io/instance=ovn,app.kubernetes.io/component=controller", "app.kubernetes.io/component=metadata-agent"} {
		run("logs "+sel, osd("kubectl", "logs", "-n", "openstack", "-l", sel, "--all-containers", "--tail", "40", "--prefix"))
	}
	run("chassis", osd("kubectl", "-n", "openstack", "exec", "deploy/ovn-central", "-c", "northd", "--", "ovn-sbctl", "--db=unix:/run/ovn/ovnsb_db.sock", "show"))
	host := func(args ...string) *exec.Cmd { return exec.Command(args[0], args[1:]...) }
	for _, node := range []struct {
		name string
		in   func(args ...string) *exec.Cmd
	}{{"node 1", host}, {"node 2", n2.nsenter}} {
		run(node.name+" addresses", node.in("ip", "-br", "addr"))
		run(node.name+" routes", node.in("ip", "route"))
		run(node.name+" ovs", node.in("ovs-vsctl", "show"))
		run(node.name+" OpenFlow flows on br-int", node.in("sh", "-c", "ovs-ofctl dump-flows br-int | grep -c ."))
		run(node.name+" ovs routes", node.in("ovs-appctl", "ovs/route/show"))
		run(node.name+" tunnel neighbours", node.in("ovs-appctl", "tnl/neigh/show"))
		run(node.name+" external ids", node.in("ovs-vsctl", "get", "open", ".", "external_ids"))
	}
	return b.String()
}

// computeNodeSecrets are the Secrets a compute-only node's pods reference (nova-compute, the
// metadata agent; ovn-controller none): what Kubernetes' node authorizer lets its kubelet
// read (charts' TestComputeNodeSecrets renders the same list).
var computeNodeSecrets = []string{"nova-compute-config", "nova-keystone", "nova-rabbitmq", "metadata-proxy", "neutron-config", "ceph-client-cinder"}

// checkComputeSecrets: with the compute node's own kubelet credential, every Secret of the
// openstack namespace but its pods' is forbidden (neutron-db and every database password
// among them), and so is listing them.
func checkComputeSecrets(t *testing.T, n *node, n2 *nsNode) {
	kubeconfig := filepath.Join(n2.stateDir(), "k3s", "agent", "kubelet.kubeconfig")
	kubectl := func(args ...string) (string, error) {
		b, err := n2.nsenter(append([]string{filepath.Join(n.stateDir, "bin", "kubectl"), "--kubeconfig", kubeconfig, "-n", "openstack"}, args...)...).CombinedOutput()
		return string(b), err
	}
	if out, err := kubectl("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"); err != nil || strings.TrimSpace(out) != "system:node:"+cnName {
		t.Fatalf("kubectl auth whoami with %s = %q, %v, want system:node:%s", kubeconfig, out, err, cnName)
	}
	out, err := n.kubectl("get", "secrets", "-n", "openstack", "-o", "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}")
	if err != nil {
		t.Fatalf("kubectl get secrets: %v\n%s", err, out)
	}
	names := strings.Fields(out)
	if !slices.Contains(names, "neutron-db") {
		t.Fatalf("the cloud has no Secret neutron-db (have %v): the check would prove nothing", names)
	}
	for _, name := range names {
		out, err := kubectl("get", "secret", name, "-o", "name")
		allowed := slices.Contains(computeNodeSecrets, name)
		switch {
		case allowed && err != nil && !strings.Contains(out, "NotFound"):
			t.Errorf("the compute node's kubelet cannot read Secret %s, which its pods use: %v\n%s", name, err, out)
		case !allowed && (err == nil || !strings.Contains(out, "forbidden")):
			t.Errorf("the compute node's kubelet reading Secret %s = %v\n%s, want forbidden", name, err, out)
		}
	}
	if out, err := kubectl("get", "secrets"); err == nil || !strings.Contains(out, "forbidden") {
		t.Errorf("the compute node's kubelet listing Secrets = %v\n%s, want forbidden", err, out)
	}
}

// checkComputeFirewall probes from node 2 (a compute node: a trusted member, not a control
// node) what the firewall keeps for control nodes and their pods: MariaDB (ClusterIP and
// pod), memcached, the OVN northbound database, the southbound database's unrestricted
// port, and node 1's kubelet and VNC ports must time out; what a compute node needs must
// connect: the southbound database's RBAC port (its chassis), RabbitMQ (nova-compute),
// CoreDNS, the Kubernetes API and osd's API.
func checkComputeFirewall(t *testing.T, n *node, n2 *nsNode) {
	internal, nodeIP, _ := isolationTargets(t, n)
	ip := map[string]string{}
	for _, tg := range internal {
		ip[tg.name] = tg.ip
	}
	targets := []isolationTarget{
		{name: "mariadb", ip: ip["mariadb"], port: 3306},
		{name: "mariadb-pod", ip: ip["mariadb-pod"], port: 3306},
		{name: "memcached", ip: ip["memcached"], port: 11211},
		{name: "ovn-nb", ip: ip["ovn-nb"], port: 6641},
		{name: "ovn-sb-unrestricted", ip: ip["ovn-sb"], port: 16642},
		{name: "kubelet@node1", ip: nodeIP, port: 10250},
		{name: "vnc5900@node1", ip: nodeIP, port: 5900},
		{name: "ovn-sb-chassis", ip: ip["ovn-sb"], port: 6642, open: true},
		{name: "rabbitmq", ip: ip["rabbitmq"], port: 5672, open: true},
		{name: "kube-dns", ip: ip["kube-dns"], port: 53, open: true},
		{name: "k3s-api@node1", ip: nodeIP, port: 6443, open: true},
		{name: "osd-api@node1", ip: nodeIP, port: 8443, open: true},
	}
	for _, tg := range targets {
		if net.ParseIP(tg.ip) == nil {
			t.Fatalf("no address for %s (have %v)", tg.name, ip)
		}
	}
	out, err := n2.nsenter("busybox", "sh", "-c", probeScript("busybox nc", targets)).CombinedOutput()
	if err != nil {
		t.Fatalf("probes from the compute node: %v\n%s", err, out)
	}
	judgeProbes(t, "the compute node", targets, string(out))
}
