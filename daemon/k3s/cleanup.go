package k3s

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
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
	n, err := unmountUnder(append([]string{p.StateDir, p.RunDir, "/run/netns/cni-"}, HostDirs...))
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

// killLeftovers kills containerd and shims started for osd's containerd socket, and the
// processes of pods (in kubepods cgroups), and returns how many it killed.
func killLeftovers(p Paths) int {
	sock := p.ContainerdSocket()
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
			if IsLeftover(string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})), string(cg), sock, p.ContainerdConfig()) {
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

// IsLeftover decides whether a process (by command line and /proc/PID/cgroup) belongs to
// osd's containers: a shim or containerd for osd's socket or config, or a pod process.
func IsLeftover(cmdline, cgroup, socket, config string) bool {
	if strings.Contains(cmdline, socket) || strings.Contains(cmdline, config) {
		return true
	}
	for _, line := range strings.Split(cgroup, "\n") {
		if strings.Contains(line, "/kubepods") {
			return true
		}
	}
	return false
}

// unmountUnder unmounts every mount point at or below one of prefixes, deepest first.
func unmountUnder(prefixes []string) (int, error) {
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
