package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/cluster"
	"github.com/osdcloud/osd/daemon/k3s"
	"github.com/osdcloud/osd/daemon/store"
)

// privateDirs are the host directories each test node gets a private, empty copy of
// (tmpfs in its own mount namespace): what k3s, the kubelet, CNI, Open vSwitch and libvirt
// write outside the state dir. Nothing a node does there reaches the host or the other node.
var privateDirs = []string{
	"/run", "/var/lib/kubelet", "/var/lib/rancher", "/etc/rancher", "/var/lib/cni", "/var/log/pods", "/var/log/containers",
	"/etc/openvswitch", "/var/lib/openvswitch", "/var/log/openvswitch",
	"/etc/libvirt", "/var/lib/libvirt", "/var/log/libvirt", "/var/cache/libvirt",
}

// nsNode is one osd node under test in its own network, mount and UTS namespaces, held open
// by a sleeping process, with its own state, run and cache dirs and its own kubelet
// cgroup root.
type nsNode struct {
	t        testing.TB
	bin      string
	name, ip string
	base     string
	holder   *exec.Cmd
	mntNS    string
	cgroup   string
	created  []string // host directories that did not exist (mount points made for the test)
	daemon   *exec.Cmd
	exited   chan struct{}
	log      bytes.Buffer
}

// newNSNode creates the namespaces and private mounts of a node (privateDirs and extra);
// t.Cleanup removes every process, cgroup and directory the node made.
func newNSNode(t testing.TB, bin, name, ip string, extra ...string) *nsNode {
	t.Helper()
	base, err := os.MkdirTemp("", "osd-cluster-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	n := &nsNode{t: t, bin: bin, name: name, ip: ip, base: base, cgroup: "/osd-test-" + name}
	holder := exec.Command("unshare", "--mount", "--propagation", "private", "--net", "--uts", "--", "sleep", "infinity")
	holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := holder.Start(); err != nil {
		t.Fatalf("unshare: %v", err)
	}
	n.holder = holder
	t.Cleanup(n.cleanup)
	// Wait until the holder runs in its own mount namespace.
	self := mountNSOf(os.Getpid())
	for i := 0; i < 100 && (n.mntNS == "" || n.mntNS == self); i++ {
		time.Sleep(20 * time.Millisecond)
		n.mntNS = mountNSOf(holder.Process.Pid)
	}
	if n.mntNS == "" || n.mntNS == self {
		t.Fatalf("holder of %s did not enter its own mount namespace", name)
	}
	var script strings.Builder
	script.WriteString("set -e\n")
	for _, d := range append(slices.Clone(privateDirs), extra...) {
		if _, err := os.Stat(d); os.IsNotExist(err) {
			n.created = append(n.created, d)
		}
		// First the host's mounts at or below d leave this (private) mount namespace, so
		// nothing hidden under the tmpfs still shows in its mount table.
		// (Several passes: stacked mounts show their lower layers once the top one goes.)
		fmt.Fprintf(&script, "for i in 1 2 3 4 5; do awk -v d=%s '$5 == d || index($5, d \"/\") == 1 {print $5}' /proc/self/mountinfo | sort -r | while read m; do umount -l \"$m\" 2>/dev/null || true; done; done\n", d)
		fmt.Fprintf(&script, "mkdir -p %s && mount -t tmpfs -o mode=0755 osd-test %s\n", d, d)
	}
	script.WriteString("ip link set lo up\n")
	// Its own hostname, as a second machine has: libvirt reports it as the hypervisor's
	// name, which Nova makes the Placement resource provider's (two computes reporting
	// one name: the second gets no resource provider and takes no servers). It resolves
	// through a private copy of /etc/hosts, as preflight wants.
	fmt.Fprintf(&script, "hostname %s\n", name)
	hosts := filepath.Join(base, "hosts")
	fmt.Fprintf(&script, "cp /etc/hosts %s && printf '127.0.1.1\\t%s\\n' >> %s && mount --bind %s /etc/hosts\n", hosts, name, hosts, hosts)
	if out, err := n.nsenter("sh", "-c", script.String()).CombinedOutput(); err != nil {
		t.Fatalf("private mounts of %s: %v\n%s", name, err, out)
	}
	return n
}

func mountNSOf(pid int) string {
	ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
	return ns
}

func (n *nsNode) stateDir() string { return filepath.Join(n.base, "state") }
func (n *nsNode) runDir() string   { return filepath.Join(n.base, "run") }

// nsenter returns a command running inside the node's namespaces.
func (n *nsNode) nsenter(args ...string) *exec.Cmd {
	cmd := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(n.holder.Process.Pid), "-m", "-n", "-u", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "OSD_CGROUP_ROOT="+n.cgroup)
	return cmd
}

// osd runs the CLI inside the node's namespaces.
func (n *nsNode) osd(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := n.nsenter(append([]string{n.bin, "--state-dir", n.stateDir(), "--run-dir", n.runDir()}, withTestRelease(args)...)...)
	go func() {
		<-ctx.Done()
		if cmd.Process != nil && ctx.Err() == context.DeadlineExceeded {
			cmd.Process.Kill()
		}
	}()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// start runs the node's daemon in its namespaces, with extra daemon flags.
func (n *nsNode) start(extra ...string) {
	n.t.Helper()
	args := append([]string{n.bin, "--state-dir", n.stateDir(), "--run-dir", n.runDir(), "daemon",
		"--node-name", n.name, "--node-ip", n.ip, "--https-address", n.ip + ":8443", "--cache-dir", filepath.Join(n.base, "cache")}, extra...)
	cmd := n.nsenter(args...)
	cmd.Stdout, cmd.Stderr = &n.log, &n.log
	// The daemon dies with the test process even when that is killed before its cleanup.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		n.t.Fatalf("start daemon of %s: %v", n.name, err)
	}
	n.daemon = cmd
	n.exited = make(chan struct{})
	go func() { cmd.Wait(); close(n.exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(filepath.Join(n.runDir(), "osd.sock")); err == nil {
			return
		}
		select {
		case <-n.exited:
			n.t.Fatalf("daemon of %s exited at start:\n%s", n.name, n.log.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	n.t.Fatalf("daemon of %s not listening after 30s", n.name)
}

// stop ends the daemon with SIGTERM (SIGKILL after timeout).
func (n *nsNode) stop(timeout time.Duration) {
	if n.daemon == nil {
		return
	}
	n.daemon.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(timeout):
		syscall.Kill(-n.daemon.Process.Pid, syscall.SIGKILL)
		<-n.exited
	}
	n.daemon = nil
}

// processes lists the node's processes: those in its mount namespace and those in its
// kubelet cgroup root (pods have mount namespaces of their own).
func (n *nsNode) processes() []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == n.holder.Process.Pid {
			continue
		}
		cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if n.mntNS != "" && mountNSOf(pid) == n.mntNS || strings.Contains(string(cg), ":"+n.cgroup+"/") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// cleanup stops the daemon, kills what the node left running, removes its cgroups, ends
// its namespaces and removes its directories, then checks that nothing is left.
func (n *nsNode) cleanup() {
	t := n.t
	n.stop(2 * time.Minute)
	if t.Failed() {
		t.Logf("%s daemon output:\n%s", n.name, tail(n.log.String(), 40))
		if b, err := os.ReadFile(filepath.Join(n.stateDir(), "logs", "k3s.log")); err == nil {
			t.Logf("%s k3s.log (tail):\n%s", n.name, tail(string(b), 60))
		}
	}
	for round := 0; round < 5; round++ {
		pids := n.processes()
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if left := n.processes(); len(left) > 0 {
		t.Errorf("%s: processes left after cleanup: %v", n.name, left)
	}
	if _, err := k3s.RemoveCgroupRoot(n.cgroup); err != nil {
		t.Errorf("%s: remove cgroup root: %v", n.name, err)
	}
	if dirs, _ := k3s.CgroupDirs("/sys/fs/cgroup", n.cgroup); len(dirs) > 0 {
		for _, d := range dirs {
			if _, err := os.Stat(d); err == nil {
				t.Errorf("%s: cgroup %s left", n.name, d)
			}
		}
	}
	syscall.Kill(-n.holder.Process.Pid, syscall.SIGKILL)
	n.holder.Wait()
	for _, d := range n.created {
		os.Remove(d) // empty unless someone else uses it now
	}
	// The state dir holds mounts only inside the node's mount namespace, gone with it.
	if err := os.RemoveAll(n.base); err != nil {
		t.Errorf("%s: remove %s: %v", n.name, n.base, err)
	}
	if out, _ := exec.Command("grep", "-c", n.base, "/proc/self/mountinfo").Output(); strings.TrimSpace(string(out)) != "0" {
		t.Errorf("%s: mounts under %s left in the host's mount namespace", n.name, n.base)
	}
}

// connect joins the two nodes' network namespaces with a veth pair.
// vethPair links the network namespaces of a and b with a veth pair, end va in a's and vb
// in b's (unaddressed, down).
func vethPair(t testing.TB, a, b *nsNode, va, vb string) {
	t.Helper()
	t.Cleanup(func() { exec.Command("ip", "link", "del", va).Run() }) // only if it never moved
	for _, args := range [][]string{
		{"link", "add", va, "type", "veth", "peer", "name", vb},
		{"link", "set", va, "netns", strconv.Itoa(a.holder.Process.Pid)},
		{"link", "set", vb, "netns", strconv.Itoa(b.holder.Process.Pid)},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v\n%s", args, err, out)
		}
	}
}

func connect(t testing.TB, a, b *nsNode) {
	t.Helper()
	const va, vb = "osdt-a", "osdt-b"
	vethPair(t, a, b, va, vb)
	for _, x := range []struct {
		n   *nsNode
		dev string
	}{{a, va}, {b, vb}} {
		script := fmt.Sprintf("set -e; ip addr add %s/24 dev %s; ip link set %s up; ip route add default dev %s", x.n.ip, x.dev, x.dev, x.dev)
		if out, err := x.n.nsenter("sh", "-c", script).CombinedOutput(); err != nil {
			t.Fatalf("address %s: %v\n%s", x.n.name, err, out)
		}
	}
	if out, err := a.nsenter("ping", "-c", "1", "-W", "5", b.ip).CombinedOutput(); err != nil {
		t.Fatalf("%s cannot reach %s: %v\n%s", a.name, b.name, err, out)
	}
}

func requireCluster(t testing.TB) {
	t.Helper()
	requireRoot(t)
	if os.Getenv("OSD_E2E") == "" {
		t.Skip("set OSD_E2E=1 to run the two-node cluster test")
	}
	for _, tool := range []string{"unshare", "nsenter", "ip", "ping"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not installed (test/deps.sh installs it): %v", tool, err)
		}
	}
}

// kubeNode is what the test reads of a Kubernetes node.
type kubeNode struct {
	Metadata struct {
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Status struct {
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		} `json:"conditions"`
	} `json:"status"`
}

func (k kubeNode) ready() bool {
	for _, c := range k.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == "True"
		}
	}
	return false
}

// twoNodes brings up node 1 (osd init --kubernetes-only, its daemon started with
// n1flags) and node 2 (daemon only), each in its own namespaces, connected by a veth pair.
func twoNodes(t testing.TB, n1flags ...string) (*nsNode, *nsNode) {
	// The nodes have namespaces of their own, but share the host's CPUs, kernel settings and
	// cgroups: they run before the shared cloud (or, in a benchmark, after its teardown).
	hostToItself(t)
	bin := osdBin(t)
	n1 := newNSNode(t, bin, "osdt-n1", "10.99.0.1")
	n2 := newNSNode(t, bin, "osdt-n2", "10.99.0.2")
	connect(t, n1, n2)
	n1.start(n1flags...)
	t0 := time.Now()
	if out, err := n1.osd(10*time.Minute, "init", "--kubernetes-only", "--timeout", "9m"); err != nil {
		t.Fatalf("osd init on %s: %v\n%s", n1.name, err, out)
	}
	t.Logf("osd init --kubernetes-only on %s took %s", n1.name, time.Since(t0).Round(100*time.Millisecond))
	n2.start()
	return n1, n2
}

// addToken issues a join token for name with roles on n and returns it.
func addToken(t testing.TB, n *nsNode, name, roles string) string {
	t.Helper()
	out, err := n.osd(time.Minute, "cluster", "add", name, "--ttl", "1h", "--role", roles)
	if err != nil {
		t.Fatalf("osd cluster add: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}

// join issues a token with roles on n1 and joins n2 with it (given as an argument, which
// osd join moves off its command line); it returns the token and how long the join took.
func join(t testing.TB, n1, n2 *nsNode, roles string) (string, time.Duration) {
	t.Helper()
	token := addToken(t, n1, n2.name, roles)
	t0 := time.Now()
	if out, err := n2.osd(10*time.Minute, "join", token, "--timeout", "9m"); err != nil {
		t.Fatalf("osd join on %s: %v\n%s", n2.name, err, out)
	}
	return token, time.Since(t0)
}

// members is osd cluster list on n.
func members(t testing.TB, n *nsNode) []api.Member {
	t.Helper()
	out, err := n.osd(time.Minute, "cluster", "list", "--format", "json")
	if err != nil {
		t.Fatalf("osd cluster list: %v\n%s", err, out)
	}
	var ms []api.Member
	if err := json.Unmarshal([]byte(out), &ms); err != nil {
		t.Fatalf("osd cluster list: %v\n%s", err, out)
	}
	return ms
}

// memberCertLifetime is how long node 1's member certificates last in TestTwoNodeCluster
// (the shortest the daemon takes).
const memberCertLifetime = time.Minute

// TestTwoNodeCluster: node 1 runs osd init --kubernetes-only in its own namespaces (its
// member certificates last memberCertLifetime); node 2 joins it with a token as a control node
// while node 1's own address holds hundreds of connections open against its API, shows in
// osd cluster list and as a Ready k3s node with the role label only osd can set. What the
// join hands out grants nothing beyond registering one agent, and is gone once the join
// completes; node 2's agent restarts without it; node 2 stays a member past its first
// certificate's end by renewing it. osd cluster remove drains and deletes its node and revokes it;
// node 2's daemon hears so at its next heartbeat and stops, and cannot come back with
// what it kept. The same token, used again against the cluster, is refused. Everything
// the nodes made is gone afterwards.
func TestTwoNodeCluster(t *testing.T) {
	requireCluster(t)
	n1, n2 := twoNodes(t, "--member-cert-lifetime", memberCertLifetime.String())
	stopLoris := slowLoris(t, n1, n1.ip+":8443")
	token, took := join(t, n1, n2, "control")
	joinedAt := time.Now()
	stopLoris()
	t.Logf("osd join (token to member with a Ready node), with 200 connections held open against the API, took %s", took.Round(100*time.Millisecond))

	m2 := waitMember(t, n1, n2, time.Minute)
	if m2 == nil || m2.NodeState != api.NodeReady || strings.Join(m2.Roles, ",") != "control" || m2.LastHeartbeat == nil || m2.Version == "" {
		t.Fatalf("osd cluster list on %s: %s = %+v, want Ready, roles control, a heartbeat and a version", n1.name, n2.name, m2)
	}
	out, _ := n1.osd(time.Minute, "cluster", "list")
	t.Logf("osd cluster list:\n%s", out)

	out, err := n1.osd(time.Minute, "kubectl", "get", "node", n2.name, "-o", "json")
	if err != nil {
		t.Fatalf("kubectl get node %s: %v\n%s", n2.name, err, out)
	}
	var kn kubeNode
	if err := json.Unmarshal([]byte(out), &kn); err != nil {
		t.Fatal(err)
	}
	const prefix = "node-restriction.kubernetes.io/"
	if !kn.ready() || kn.Metadata.Labels[prefix+"openstack-control-plane"] != "enabled" {
		t.Errorf("node %s: ready %v, labels %v, want Ready with %sopenstack-control-plane=enabled", n2.name, kn.ready(), kn.Metadata.Labels, prefix)
	}
	for _, l := range []string{"openvswitch", "openstack-compute-node"} {
		if _, ok := kn.Metadata.Labels[prefix+l]; ok {
			t.Errorf("node %s has label %s, want only its control role's", n2.name, prefix+l)
		}
	}
	if left := agentTokens(t, n1, n2.name); left != "" {
		t.Errorf("agent tokens of %s after its join completed: %s, want none", n2.name, left)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(n2.daemon.Process.Pid)); err != nil {
		t.Fatal("node 2's daemon is gone")
	}
	if out, err := n2.osd(time.Minute, "join", "garbage-token"); err != nil || !strings.Contains(out, "already") {
		t.Errorf("osd join again on a member = %q, %v, want it to say it is already a member", out, err)
	}

	t.Run("what a join hands out grants nothing more", func(t *testing.T) { checkJoinCredential(t, n1, n2) })
	t.Run("a join credential registers only its own node, until revoked", func(t *testing.T) { checkJoinBoundToName(t, n1, n2) })

	t.Run("the agent restarts after its join credential is gone", func(t *testing.T) {
		n2.stop(2 * time.Minute)
		n2.start()
		deadline := time.Now().Add(3 * time.Minute)
		for time.Now().Before(deadline) {
			var st struct {
				Kubernetes struct {
					NodeReady bool   `json:"node_ready"`
					Reason    string `json:"reason"`
				} `json:"kubernetes"`
			}
			if out, err := n2.osd(time.Minute, "status", "--format", "json"); err == nil && jsonUnmarshal(out, &st) == nil && st.Kubernetes.NodeReady {
				return
			}
			time.Sleep(2 * time.Second)
		}
		t.Fatalf("%s's node not Ready 3 minutes after its daemon restarted without a join credential", n2.name)
	})

	t.Run("a 1-minute member certificate renews itself past its end", func(t *testing.T) {
		// Members renew at half of the lifetime: three certificates (two renewals), and the
		// member still there and heartbeating after the first one ended, are enough.
		seen := map[string]bool{m2.Fingerprint: true}
		for len(seen) < 3 || time.Since(joinedAt) < memberCertLifetime+30*time.Second {
			if time.Since(joinedAt) > 5*time.Minute {
				break
			}
			time.Sleep(10 * time.Second)
			m := waitMember(t, n1, n2, 0)
			if m == nil {
				t.Fatalf("%s is no longer in osd cluster list %s after joining", n2.name, time.Since(joinedAt).Round(time.Second))
			}
			if m.LastHeartbeat == nil || time.Since(*m.LastHeartbeat) > time.Minute {
				t.Fatalf("%s's last heartbeat %v is over a minute old %s after joining", n2.name, m.LastHeartbeat, time.Since(joinedAt).Round(time.Second))
			}
			seen[m.Fingerprint] = true
		}
		if len(seen) < 3 {
			t.Errorf("%s held %d member certificates in %s, want at least 3 (renewed twice)", n2.name, len(seen), time.Since(joinedAt).Round(time.Second))
		}
		t.Logf("%s renewed its %s member certificate %d times in the %s after its join", n2.name, memberCertLifetime, len(seen)-1, time.Since(joinedAt).Round(time.Second))
	})

	t.Run("a third node joins through the firewalls", func(t *testing.T) { checkThirdNode(t, n1, n2) })

	t.Run("remove", func(t *testing.T) {
		if out, err := n1.osd(5*time.Minute, "cluster", "remove", n2.name); err != nil {
			t.Fatalf("osd cluster remove %s: %v\n%s", n2.name, err, out)
		}
		if out, err := n1.osd(time.Minute, "kubectl", "get", "node", n2.name); err == nil || !strings.Contains(out, "NotFound") {
			t.Errorf("kubectl get node %s after removal = %q, %v, want NotFound", n2.name, out, err)
		}
		for _, m := range members(t, n1) {
			if m.Name == n2.name {
				t.Errorf("osd cluster list after removal still lists %s", n2.name)
			}
		}
		select {
		case <-n2.exited:
			t.Logf("node 2's daemon stopped after its removal")
		case <-time.After(3 * time.Minute):
			t.Errorf("node 2's daemon still runs 3 minutes after its removal, want it to notice at its next heartbeat and stop")
		}
		n2.daemon = nil
		if h, err := hostRecord(n2.stateDir(), nil); err != nil || h.Join == nil || h.Join.State != "removed" {
			t.Errorf("node 2's join after removal = %+v, %v, want removed", h.Join, err)
		}
	})

	t.Run("a removed node cannot come back with what it kept", func(t *testing.T) { checkRemovedStaysOut(t, n1, n2) })
	// What node 2 kept, for after its reset: a new token for its name (osd cluster add)
	// replaces its used one, which the token check below needs still on record.
	kept := keptKubeletCert(t, n2)

	t.Run("reset the removed node", func(t *testing.T) {
		// osd reset removes the kubelet's and CNI's host dirs: only ever inside node 2's
		// mount namespace, where they are private tmpfs mounts it must clean, not remove.
		for _, d := range k3s.HostDirs[:4] {
			// (The kubelet stacks a shared bind of its root dir on itself: tmpfs twice.)
			fs, err := n2.nsenter("findmnt", "-n", "-o", "FSTYPE", d).Output()
			if types := strings.Fields(string(fs)); err != nil || len(types) == 0 || strings.Trim(strings.Join(types, " "), "tmpfs ") != "" {
				mi, _ := n2.nsenter("sh", "-c", "grep -e "+d+" /proc/self/mountinfo | head -20").CombinedOutput()
				t.Fatalf("node 2's %s is %q (%v), want its private tmpfs: not running osd reset\n%s", d, fs, err, mi)
			}
		}
		hostKubelet, _ := os.ReadDir("/var/lib/kubelet")
		out, err := n2.osd(5*time.Minute, "reset", "--yes")
		if err != nil {
			t.Fatalf("osd reset on %s: %v\n%s", n2.name, err, out)
		}
		t.Logf("osd reset on %s:\n%s", n2.name, out)
		if _, err := os.Stat(n2.stateDir()); !os.IsNotExist(err) {
			t.Errorf("node 2's state dir after reset: %v, want it gone", err)
		}
		if left := n2.processes(); len(left) != 0 {
			t.Errorf("node 2's processes after reset: %v, want none", left)
		}
		if dirs, _ := k3s.CgroupDirs("/sys/fs/cgroup", n2.cgroup); len(dirs) > 0 {
			if _, err := os.Stat(dirs[0]); err == nil {
				t.Errorf("node 2's cgroup root %s after reset, want it gone", dirs[0])
			}
		}
		if out, err := n2.nsenter("ls", "-A", "/var/lib/kubelet", "/var/lib/cni").CombinedOutput(); err != nil || strings.Contains(string(out), "pods") {
			t.Errorf("node 2's kubelet and CNI dirs after reset = %q, %v, want empty", out, err)
		}
		if after, err := os.ReadDir("/var/lib/kubelet"); err != nil || len(hostKubelet) > 0 && len(after) == 0 {
			t.Errorf("the host's /var/lib/kubelet after node 2's reset: %d entries, %v (before: %d), want it untouched", len(after), err, len(hostKubelet))
		}
	})

	t.Run("the same token twice, against the cluster", func(t *testing.T) {
		// Node 2 holds nothing of its first join now, so nothing local refuses the token:
		// the cluster must.
		n2.start()
		out, err := n2.osd(2*time.Minute, "join", "--token-file", writeSecret(t, token))
		if err == nil || !strings.Contains(out, "the cluster refused the join") || !strings.Contains(out, "already used") {
			t.Errorf("osd join with the used token = %q, %v, want the cluster's refusal: already used", out, err)
		}
		n2.stop(time.Minute)
	})
	t.Run("a removed name stays barred to what it kept after osd cluster add", func(t *testing.T) { checkReaddStaysBarred(t, n1, n2, kept) })
}

// waitMember polls osd cluster list on n1 until n2 is a Ready member with a heartbeat and
// a version, for at most timeout (0: once), and returns n2's entry (nil if absent).
func waitMember(t testing.TB, n1, n2 *nsNode, timeout time.Duration) *api.Member {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var m2 *api.Member
		ms := members(t, n1)
		for i := range ms {
			if ms[i].Name == n2.name {
				m2 = &ms[i]
			}
		}
		if m2 != nil && m2.NodeState == api.NodeReady && m2.LastHeartbeat != nil && m2.Version != "" || !time.Now().Before(deadline) {
			return m2
		}
		time.Sleep(2 * time.Second)
	}
}

// agentTokens lists the k3s bootstrap tokens osd issued for node, as n's kubectl sees them.
func agentTokens(t testing.TB, n *nsNode, node string) string {
	t.Helper()
	out, err := n.osd(time.Minute, "kubectl", "get", "secrets", "-n", "kube-system", "-l", "osd.cloud/agent-token-for="+node, "-o", "name")
	if err != nil {
		t.Fatalf("kubectl get secrets: %v\n%s", err, out)
	}
	return strings.TrimSpace(out)
}

func writeSecret(t testing.TB, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(s+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// slowLoris holds connections open against addr from n's own address (n's network
// namespace), the way a slow-loris attack does: batches of 200 TCP connections that never
// start their TLS handshake, opened again every few seconds. It returns a stop function.
func slowLoris(t testing.TB, n *nsNode, addr string) func() {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	script := fmt.Sprintf(`while :; do fds=(); for i in $(seq 200); do exec {fd}<>/dev/tcp/%s/%s 2>/dev/null && fds+=($fd); done; sleep 4; for fd in "${fds[@]}"; do exec {fd}>&-; done; done`, host, port)
	cmd := n.nsenter("bash", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("slow-loris: %v", err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
		}
	}
	t.Cleanup(stop)
	time.Sleep(2 * time.Second) // the first batch is open
	return stop
}

// checkJoinCredential plays a node that was handed a join token (osdt-n3): it makes the
// first join request by hand from node 2's network, and tries what it received: the k3s
// credential registers agents (the supervisor's agent routes answer) but reads no Secret
// and cannot fetch the bootstrap data a k3s server needs to join; revoking the token
// deletes it.
func checkJoinCredential(t *testing.T, n1, n2 *nsNode) {
	tok, err := cluster.DecodeToken(addToken(t, n1, "osdt-n3", "compute"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := cluster.NewMemberKey(tok.Name)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(api.JoinRequest{Name: tok.Name, Secret: tok.Secret, Address: "10.99.0.3:8443", CSR: key.CSRPEM})
	out, err := n2.nsenter("curl", "-sk", "--max-time", "30", "-H", "Content-Type: application/json", "--data-binary", "@"+writeSecret(t, string(body)),
		"https://"+tok.Addresses[0]+"/1.0/cluster/join").Output()
	var env struct {
		Metadata api.JoinResponse `json:"metadata"`
	}
	if err != nil || json.Unmarshal(out, &env) != nil || env.Metadata.K3sToken == "" {
		t.Fatalf("POST cluster/join as osdt-n3 = %s, %v, want the join credentials", out, err)
	}
	if strings.Contains(string(out), "member_key_pem") {
		t.Errorf("the join answer carries a private key: %s", out)
	}
	_, creds, ok := strings.Cut(env.Metadata.K3sToken, "::")
	if !ok || strings.Count(creds, ".") != 1 || strings.Contains(creds, ":") {
		t.Fatalf("k3s credential %q, want K10<ca hash>::<id>.<secret> (a bootstrap token, never a server token)", env.Metadata.K3sToken)
	}
	server := "https://" + n1.ip + ":6443"
	status := func(args ...string) string {
		out, _ := n2.nsenter(append([]string{"curl", "-sk", "--max-time", "30", "-o", "/dev/null", "-w", "%{http_code}"}, args...)...).Output()
		return string(out)
	}
	if got := status("-H", "Authorization: Bearer "+creds, server+"/v1-k3s/config"); got != "200" {
		t.Errorf("GET /v1-k3s/config with the agent credential = %s, want 200 (it is a valid agent credential)", got)
	}
	for _, auth := range [][]string{{"-H", "Authorization: Bearer " + creds}, {"-u", "server:" + creds}} {
		if got := status(append(auth, server+"/v1-k3s/server-bootstrap")...); got != "401" && got != "403" {
			t.Errorf("GET /v1-k3s/server-bootstrap (what a joining k3s server asks for) with %s = %s, want 401 or 403", auth[0], got)
		}
	}
	empty := writeSecret(t, "apiVersion: v1\nkind: Config\n")
	kubectl := filepath.Join(n1.stateDir(), "bin", "kubectl")
	out, err = n2.nsenter(kubectl, "--kubeconfig", empty, "--server", server, "--insecure-skip-tls-verify", "--token", creds,
		"get", "secrets", "-A").CombinedOutput()
	if err == nil || !strings.Contains(strings.ToLower(string(out)), "forbidden") {
		t.Errorf("kubectl get secrets -A with the agent credential = %q, %v, want forbidden", out, err)
	}
	if left := agentTokens(t, n1, tok.Name); left == "" {
		t.Fatalf("no agent token for %s while its join is under way", tok.Name)
	}
	if out, err := n1.osd(time.Minute, "cluster", "revoke", tok.Name); err != nil {
		t.Fatalf("osd cluster revoke %s: %v\n%s", tok.Name, err, out)
	}
	if left := agentTokens(t, n1, tok.Name); left != "" {
		t.Errorf("agent tokens of %s after its token was revoked: %s, want none", tok.Name, left)
	}
	// The API server caches a token's authentication for ten seconds.
	got := ""
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		if got = status("-H", "Authorization: Bearer "+creds, server+"/v1-k3s/config"); got == "401" || got == "403" {
			break
		}
	}
	if got != "401" && got != "403" {
		t.Errorf("GET /v1-k3s/config with a revoked join's agent credential, 30 s after = %s, want refused", got)
	}
}

// hostRecord reads the host record of the stopped daemon of stateDir, changed with update
// first when it is not nil.
func hostRecord(stateDir string, update func(*store.Host) error) (store.Host, error) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(stateDir, "osd.db"))
	if err != nil {
		return store.Host{}, err
	}
	defer db.Close()
	if update != nil {
		if err := db.UpdateHost(ctx, update); err != nil {
			return store.Host{}, err
		}
	}
	return db.Host(ctx)
}

// checkRemovedStaysOut gives the removed node 2 back everything it kept (its join record
// set to member again, its kubelet certificate) and checks that it cannot register: node
// 1's firewall no longer lets node 2 reach the Kubernetes API (its address left the
// members' set with the removal), its daemon's agent does not bring the node back, and its
// kubelet certificate cannot create the Node directly (tried from node 1 itself, past the
// firewall: the certificate is refused, not only the address).
func checkRemovedStaysOut(t *testing.T, n1, n2 *nsNode) {
	if _, err := hostRecord(n2.stateDir(), func(h *store.Host) error {
		if h.Join == nil || h.Join.State != "removed" {
			return fmt.Errorf("node 2's join = %+v, want removed", h.Join)
		}
		h.Join.State = "member"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	n2.start()
	defer n2.stop(2 * time.Minute)
	agent := filepath.Join(n2.stateDir(), "k3s", "agent")
	node := writeSecret(t, `{"apiVersion":"v1","kind":"Node","metadata":{"name":"`+n2.name+`"}}`)
	kubectl := filepath.Join(n1.stateDir(), "bin", "kubectl")
	empty := writeSecret(t, "apiVersion: v1\nkind: Config\n")
	if out, _ := n2.nsenter("curl", "-sk", "--connect-timeout", "5", "-o", "/dev/null", "-w", "%{http_code}", "https://"+n1.ip+":6443/").Output(); string(out) != "000" {
		t.Errorf("node 1's Kubernetes API from the removed node 2 answered %s, want no connection (node 1's firewall drops it)", out)
	}
	out, err := n1.nsenter(kubectl, "--kubeconfig", empty, "--server", "https://"+n1.ip+":6443", "--insecure-skip-tls-verify",
		"--client-certificate", filepath.Join(agent, "client-kubelet.crt"), "--client-key", filepath.Join(agent, "client-kubelet.key"),
		"create", "-f", node).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "removed from the osd cluster") {
		t.Errorf("creating its Node with the removed node's kubelet certificate = %q, %v, want it denied as removed", out, err)
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Second) {
		if out, err := n1.osd(time.Minute, "kubectl", "get", "node", n2.name); err == nil || !strings.Contains(out, "NotFound") {
			t.Fatalf("kubectl get node %s with the removed node running again = %q, %v, want NotFound", n2.name, out, err)
		}
	}
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// checkThirdNode: a third node, on a link of its own to node 1 (routed through it), joins
// with the compute role while node 2 is a member: node 1's firewall lets it join and
// trusts it, node 2's learns it from the member list; once removed, node 1's forgets it.
func checkThirdNode(t *testing.T, n1, n2 *nsNode) {
	const n1IP, n3IP = "10.99.2.1", "10.99.2.3"
	n3 := newNSNode(t, n1.bin, "osdt-n3", n3IP)
	const v1, v3 = "osdt-c", "osdt-d"
	vethPair(t, n1, n3, v1, v3)
	for _, x := range []struct {
		n      *nsNode
		script string
	}{
		{n1, fmt.Sprintf("set -e; ip addr add %s/24 dev %s; ip link set %s up", n1IP, v1, v1)},
		{n3, fmt.Sprintf("set -e; ip addr add %s/24 dev %s; ip link set %s up; ip link set lo up; ip route add default via %s", n3IP, v3, v3, n1IP)},
	} {
		if out, err := x.n.nsenter("sh", "-c", x.script).CombinedOutput(); err != nil {
			t.Fatalf("address %s: %v\n%s", x.n.name, err, out)
		}
	}
	if out, err := n3.nsenter("ping", "-c", "1", "-W", "5", n1.ip).CombinedOutput(); err != nil {
		t.Fatalf("%s cannot reach %s through its link: %v\n%s", n3.name, n1.ip, err, out)
	}
	n3.start()
	_, took := join(t, n1, n3, "compute")
	if m := waitMember(t, n1, n3, time.Minute); m == nil || m.NodeState != api.NodeReady {
		t.Fatalf("osd cluster list on %s: %s = %+v, want a Ready member", n1.name, n3.name, m)
	}
	t.Logf("the third node joined in %s", took.Round(100*time.Millisecond))
	members4 := func(n *nsNode) string {
		out, _ := n.nsenter("nft", "list", "set", "inet", "osd-filter", "members4").CombinedOutput()
		return string(out)
	}
	if set := members4(n1); !strings.Contains(set, n3IP) {
		t.Errorf("%s's firewall members after the join lack %s:\n%s", n1.name, n3IP, set)
	}
	// A member reads the member list every minute.
	deadline := time.Now().Add(3 * time.Minute)
	for !strings.Contains(members4(n2), n3IP) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Second)
	}
	if set := members4(n2); !strings.Contains(set, n3IP) {
		t.Errorf("%s's firewall members 3 minutes after the third node joined lack %s:\n%s", n2.name, n3IP, set)
	}
	if out, err := n1.osd(5*time.Minute, "cluster", "remove", n3.name); err != nil {
		t.Fatalf("osd cluster remove %s: %v\n%s", n3.name, err, out)
	}
	if set := members4(n1); strings.Contains(set, n3IP) {
		t.Errorf("%s's firewall members after the third node's removal still hold %s:\n%s", n1.name, n3IP, set)
	}
	select {
	case <-n3.exited:
	case <-time.After(3 * time.Minute):
		t.Errorf("the third node's daemon still runs 3 minutes after its removal")
	}
	n3.daemon = nil
}
