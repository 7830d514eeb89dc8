package k3s

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// HostDirs are the host directories outside the state and run dirs that the embedded
// kubelet, CNI and k3s agent create.
var HostDirs = []string{"/var/lib/kubelet", "/var/lib/cni", "/var/log/pods", "/var/log/containers", "/etc/rancher/node"}

// Sysctls are the kernel settings the embedded k3s changes; their original values are
// recorded before the first start and restored on reset.
var Sysctls = []string{
	"net/ipv4/ip_forward", "net/ipv4/conf/all/route_localnet", "net/netfilter/nf_conntrack_max",
	"net/bridge/bridge-nf-call-iptables", "net/bridge/bridge-nf-call-ip6tables",
	"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// ReadSysctls returns the current value of each of Sysctls that exists.
func ReadSysctls() map[string]string {
	out := map[string]string{}
	for _, k := range Sysctls {
		if b, err := os.ReadFile("/proc/sys/" + k); err == nil {
			out[k] = strings.TrimSpace(string(b))
		}
	}
	return out
}

// CleanupReport lists what a cleanup removed.
type CleanupReport struct {
	Killed    int
	Unmounted int
	Removed   []string
}

// Cleanup removes what the embedded k3s left on the host: processes of osd's containerd
// and its pods, mounts, network namespaces, the pod bridge, iptables chains, the host
// directories, and restores sysctls to original (when known). The daemon must be stopped.
func Cleanup(ctx context.Context, p Paths, original map[string]string) (CleanupReport, error) {
	var rep CleanupReport
	var errs []error
	if !filepath.IsAbs(p.StateDir) || !filepath.IsAbs(p.RunDir) || p.StateDir == "/" || p.RunDir == "/" {
		return rep, fmt.Errorf("refusing to clean up state dir %q / run dir %q: want absolute paths other than /", p.StateDir, p.RunDir)
	}
	rep.Killed = killLeftovers(p)
	if removed, err := RemoveCgroupRoot(p.CgroupRoot); err != nil {
		errs = append(errs, err)
	} else if removed > 0 {
		rep.Removed = append(rep.Removed, fmt.Sprintf("cgroup root %s (%d directories)", p.CgroupRoot, removed))
	}
	// A host dir that is itself a mount point was mounted by someone else (an admin, or a
	// test giving a node private copies): it stays mounted and only its content goes.
	// Unmounting it would expose, and then remove, what is underneath.
	keep := map[string]bool{}
	for _, d := range HostDirs {
		if isMountPoint(d) {
			keep[d] = true
		}
	}
	n, err := unmountUnder(append([]string{p.StateDir, p.RunDir, "/run/netns/cni-"}, HostDirs...), keep)
	rep.Unmounted = n
	errs = append(errs, err)
	if ents, _ := filepath.Glob("/run/netns/cni-*"); len(ents) > 0 {
		for _, e := range ents {
			if os.Remove(e) == nil {
				rep.Removed = append(rep.Removed, e)
			}
		}
	}
	if l, err := netlink.LinkByName(BridgeName); err == nil {
		if err := netlink.LinkDel(l); err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", BridgeName, err))
		} else {
			rep.Removed = append(rep.Removed, "link "+BridgeName)
		}
	}
	for _, tool := range []string{"iptables", "ip6tables"} {
		removed, err := flushChains(ctx, tool)
		if err != nil {
			errs = append(errs, err)
		} else if removed > 0 {
			rep.Removed = append(rep.Removed, fmt.Sprintf("%s: %d rules and chains", tool, removed))
		}
	}
	for k, v := range original {
		if !strings.HasPrefix(k, "net/") && !strings.HasPrefix(k, "vm/") && !strings.HasPrefix(k, "kernel/") {
			continue
		}
		if cur, err := os.ReadFile("/proc/sys/" + k); err == nil && strings.TrimSpace(string(cur)) != v {
			if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("restore sysctl %s: %w", k, err))
			} else {
				rep.Removed = append(rep.Removed, "sysctl "+k+" restored to "+v)
			}
		}
	}
	for _, d := range append([]string{p.RunDir, p.StateDir}, HostDirs...) {
		if keep[d] {
			if err := removeContents(d); err != nil {
				errs = append(errs, err)
			} else {
				rep.Removed = append(rep.Removed, d+"/*")
			}
			continue
		}
		if _, err := os.Lstat(d); err == nil {
			if err := os.RemoveAll(d); err != nil {
				errs = append(errs, fmt.Errorf("remove %s: %w", d, err))
			} else {
				rep.Removed = append(rep.Removed, d)
			}
		}
	}
	return rep, errors.Join(errs...)
}

// killLeftovers kills containerd and the shims started for osd's own containerd socket,
// and the processes of this node's pods (in its own kubepods cgroup), and returns how
// many it killed. Processes of other nodes on the same host (another osd daemon with
// another run dir and cgroup root, or another Kubernetes) are left alone.
func killLeftovers(p Paths) int {
	self := Owner{Socket: p.ContainerdSocket(), Config: p.ContainerdConfig(), PodsCgroup: p.PodsCgroup(), MountNS: mountNS(os.Getpid())}
	killed := 0
	for round := 0; round < 3; round++ {
		var pids []int
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
			proc := Proc{Args: strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"), Cgroup: string(cg), MountNS: mountNS(pid)}
			if IsLeftover(proc, self) {
				pids = append(pids, pid)
			}
		}
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	return killed
}

// mountNS names the mount namespace of pid ("" when unreadable).
func mountNS(pid int) string {
	ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
	return ns
}

// Proc is what IsLeftover looks at of one process: its arguments, its /proc/PID/cgroup
// and its mount namespace.
type Proc struct {
	Args    []string
	Cgroup  string
	MountNS string
}

// Owner identifies one node's processes: its containerd socket and configuration, the
// cgroup its pods live under (Paths.PodsCgroup) and the mount namespace its daemon runs in.
type Owner struct {
	Socket, Config, PodsCgroup, MountNS string
}

// IsLeftover decides whether p belongs to the node o (pure): containerd or a shim whose
// arguments name o's socket or configuration exactly and that runs in o's mount namespace
// (two nodes with private /run could use the same path), or a process in a cgroup at or
// below o's pods cgroup in any hierarchy. A pod of another node (/kubepods when o's is
// /osd-node2/kubepods, or the other way round) is never o's.
func IsLeftover(p Proc, o Owner) bool {
	if o.MountNS == "" || p.MountNS == "" || p.MountNS == o.MountNS {
		for i, a := range p.Args {
			v := a
			if k, val, ok := strings.Cut(a, "="); ok && strings.HasPrefix(k, "-") {
				v = val
			} else if i == 0 {
				continue
			}
			if v == o.Socket || v == o.Config || v == "unix://"+o.Socket {
				return true
			}
		}
	}
	pods := path.Clean("/" + o.PodsCgroup)
	if pods == "/" {
		return false
	}
	for _, line := range strings.Split(p.Cgroup, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if cg := parts[2]; cg == pods || strings.HasPrefix(cg, pods+"/") {
			return true
		}
	}
	return false
}

// removeContents removes everything inside dir but dir itself.
func removeContents(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("clean %s: %w", dir, err)
	}
	var errs []error
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// isMountPoint reports whether dir is a mount point in this mount namespace.
func isMountPoint(dir string) bool {
	points, err := mountPoints()
	return err == nil && points[filepath.Clean(dir)]
}

// mountPoints lists the mount points of this mount namespace.
func mountPoints() (map[string]bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 5 {
			out[unescapeMount(fields[4])] = true
		}
	}
	return out, sc.Err()
}

// unmountUnder unmounts every mount point at or below one of prefixes, deepest first,
// except the mount points in keep themselves (mounts below them do go).
func unmountUnder(prefixes []string, keep map[string]bool) (int, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if keep[mp] {
			continue
		}
		for _, pre := range prefixes {
			if mp == pre || strings.HasPrefix(mp, strings.TrimSuffix(pre, "/")+"/") || (strings.HasSuffix(pre, "-") && strings.HasPrefix(mp, pre)) {
				points = append(points, mp)
				break
			}
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	n := 0
	var errs []error
	for _, mp := range points {
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// flushChains removes the Kubernetes and CNI rules and chains from every table.
func flushChains(ctx context.Context, tool string) (int, error) {
	if _, err := exec.LookPath(tool + "-save"); err != nil {
		return 0, nil
	}
	saved, err := exec.CommandContext(ctx, tool+"-save").Output()
	if err != nil {
		return 0, fmt.Errorf("%s-save: %w", tool, err)
	}
	kept, removed := FilterRules(string(saved))
	if removed == 0 {
		return 0, nil
	}
	cmd := exec.CommandContext(ctx, tool+"-restore")
	cmd.Stdin = strings.NewReader(kept)
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("%s-restore: %w: %s", tool, err, strings.TrimSpace(string(out)))
	}
	return removed, nil
}

// FilterRules drops from an iptables-save dump every chain declaration and rule that
// mentions a KUBE- or CNI- chain (the ones kube-proxy, the kubelet and the CNI plugins
// create), and returns the rest and how many lines it dropped.
func FilterRules(dump string) (string, int) {
	var b strings.Builder
	removed := 0
	for _, line := range strings.SplitAfter(dump, "\n") {
		t := strings.TrimSpace(line)
		if strings.Contains(t, "KUBE-") || strings.Contains(t, "CNI-") {
			removed++
			continue
		}
		b.WriteString(line)
	}
	return b.String(), removed
}

// ClearDir removes dir, or only its content when dir is a mount point (someone else's:
// unmounting it would expose what is underneath).
func ClearDir(dir string) error {
	if isMountPoint(dir) {
		return removeContents(dir)
	}
	return os.RemoveAll(dir)
}
