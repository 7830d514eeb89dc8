package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/cluster"
	"github.com/osdcloud/osd/daemon/k3s"
)

// privateDirs are the host directories each test node gets a private, empty copy of
// (tmpfs in its own mount namespace): what k3s, the kubelet, CNI, Open vSwitch and libvirt
// write outside the state dir. Nothing a node does there reaches the host or the other node.
var privateDirs = []string{
	"/run", "/var/lib/kubelet", "/var/lib/rancher", "/etc/rancher", "/var/lib/cni", "/var/log/pods", "/var/log/containers",
	"/etc/openvswitch", "/var/lib/openvswitch", "/var/log/openvswitch",
	"/etc/libvirt", "/var/lib/libvirt", "/var/log/libvirt", "/var/cache/libvirt",
}

// nsNode is one osd node under test in its own network and mount namespaces, held open
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

// newNSNode creates the namespaces and private mounts of a node; t.Cleanup removes every
// process, cgroup and directory the node made.
func newNSNode(t testing.TB, bin, name, ip string) *nsNode {
	t.Helper()
	base, err := os.MkdirTemp("", "osd-cluster-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	n := &nsNode{t: t, bin: bin, name: name, ip: ip, base: base, cgroup: "/osd-test-" + name}
	holder := exec.Command("unshare", "--mount", "--propagation", "private", "--net", "--", "sleep", "infinity")
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
	for _, d := range privateDirs {
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
	cmd := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(n.holder.Process.Pid), "-m", "-n", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "OSD_CGROUP_ROOT="+n.cgroup)
	return cmd
}

// osd runs the CLI inside the node's namespaces.
func (n *nsNode) osd(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := n.nsenter(append([]string{n.bin, "--state-dir", n.stateDir(), "--run-dir", n.runDir()}, args...)...)
	go func() {
		<-ctx.Done()
		if cmd.Process != nil && ctx.Err() == context.DeadlineExceeded {
			cmd.Process.Kill()
		}
	}()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// start runs the node's daemon in its namespaces.
func (n *nsNode) start() {
	n.t.Helper()
	cmd := n.nsenter(n.bin, "--state-dir", n.stateDir(), "--run-dir", n.runDir(), "daemon",
		"--node-name", n.name, "--node-ip", n.ip, "--https-address", n.ip+":8443", "--cache-dir", filepath.Join(n.base, "cache"))
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
func connect(t testing.TB, a, b *nsNode) {
	t.Helper()
	const va, vb = "osdt-a", "osdt-b"
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

// twoNodes brings up node 1 (osd init --kubernetes-only) and node 2 (daemon only), each
// in its own namespaces, connected by a veth pair.
func twoNodes(t testing.TB) (*nsNode, *nsNode) {
	bin := osdBin(t)
	n1 := newNSNode(t, bin, "osdt-n1", "10.99.0.1")
	n2 := newNSNode(t, bin, "osdt-n2", "10.99.0.2")
	connect(t, n1, n2)
	n1.start()
	t0 := time.Now()
	if out, err := n1.osd(10*time.Minute, "init", "--kubernetes-only", "--timeout", "9m"); err != nil {
		t.Fatalf("osd init on %s: %v\n%s", n1.name, err, out)
	}
	t.Logf("osd init --kubernetes-only on %s took %s", n1.name, time.Since(t0).Round(100*time.Millisecond))
	n2.start()
	return n1, n2
}

// join issues a token on n1 and joins n2 with roles; it returns how long the join took.
func join(t testing.TB, n1, n2 *nsNode, roles string) time.Duration {
	t.Helper()
	out, err := n1.osd(time.Minute, "cluster", "add", n2.name, "--ttl", "10m")
	if err != nil {
		t.Fatalf("osd cluster add: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	token := lines[len(lines)-1]
	t0 := time.Now()
	if out, err := n2.osd(10*time.Minute, "join", token, "--role", roles, "--timeout", "9m"); err != nil {
		t.Fatalf("osd join on %s: %v\n%s", n2.name, err, out)
	}
	return time.Since(t0)
}

// members is osd cluster list on n.
func members(t testing.TB, n *nsNode) []cluster.Member {
	t.Helper()
	out, err := n.osd(time.Minute, "cluster", "list", "--format", "json")
	if err != nil {
		t.Fatalf("osd cluster list: %v\n%s", err, out)
	}
	var ms []cluster.Member
	if err := json.Unmarshal([]byte(out), &ms); err != nil {
		t.Fatalf("osd cluster list: %v\n%s", err, out)
	}
	return ms
}

// TestTwoNodeCluster: node 1 runs osd init --kubernetes-only in its own namespaces; node 2
// joins it with a token as a control node, shows in osd cluster list and as a Ready k3s
// node with its role label; a second join with the same token is refused; osd cluster
// remove drains and deletes its node and revokes it, and node 2's daemon notices at its
// next heartbeat and stops. Everything the nodes made is gone afterwards.
func TestTwoNodeCluster(t *testing.T) {
	requireCluster(t)
	n1, n2 := twoNodes(t)
	took := join(t, n1, n2, "control")
	t.Logf("osd join (token to member with a Ready node) took %s", took.Round(100*time.Millisecond))

	var m2 *cluster.Member
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		ms := members(t, n1)
		for i := range ms {
			if ms[i].Name == n2.name {
				m2 = &ms[i]
			}
		}
		if m2 != nil && m2.NodeState == cluster.NodeReady && m2.LastHeartbeat != nil && m2.Version != "" {
			break
		}
		time.Sleep(2 * time.Second)
	}
	if m2 == nil || m2.NodeState != cluster.NodeReady || strings.Join(m2.Roles, ",") != "control" || m2.LastHeartbeat == nil || m2.Version == "" {
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
	if !kn.ready() || kn.Metadata.Labels["openstack-control-plane"] != "enabled" {
		t.Errorf("node %s: ready %v, labels %v, want Ready with openstack-control-plane=enabled", n2.name, kn.ready(), kn.Metadata.Labels)
	}
	for _, l := range []string{"openvswitch", "openstack-compute-node"} {
		if _, ok := kn.Metadata.Labels[l]; ok {
			t.Errorf("node %s has label %s, want only its control role's", n2.name, l)
		}
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(n2.daemon.Process.Pid)); err != nil {
		t.Fatal("node 2's daemon is gone")
	}
	if out, err := n2.osd(time.Minute, "join", "garbage-token"); err != nil || !strings.Contains(out, "already") {
		t.Errorf("osd join again on a member = %q, %v, want it to say it is already a member", out, err)
	}

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
		if b, err := os.ReadFile(filepath.Join(n2.stateDir(), "cluster", "join.json")); err != nil || !strings.Contains(string(b), `"state":"removed"`) {
			t.Errorf("node 2's join state after removal = %s, %v, want removed", b, err)
		}
	})

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
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
