package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// podUIDPattern finds a pod's UID in a process's cgroup path (cgroupfs writes it with
// dashes, the systemd driver with underscores).
var podUIDPattern = regexp.MustCompile(`/pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})`)

// pssGroups is the proportional set size (KiB) of every process of the stack, by what it
// belongs to: a pod's workload (namespace/name without the generated suffixes), the
// daemon (with the embedded k3s), containerd, the shims, Open vSwitch, libvirt.
func pssGroups(n *node) map[string]int {
	groups, _ := stackPSS(n)
	return groups
}

// stackPSS is pssGroups and, read in the same pass, the file-backed part of the total
// (executables and libraries in the page cache: clean, reclaimable, and sized by how the
// host's kernel maps the page cache, e.g. whole 2 MiB folios of the osd binary on kernels
// with large folios), to tell it from what the stack allocates.
func stackPSS(n *node) (groups map[string]int, fileKiB int) {
	workloads := podWorkloads(n)
	groups = map[string]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		group := stackGroup(n, pid, workloads)
		if group == "" {
			continue
		}
		f := smapsRollupKiB(pid, "Pss:", "Pss_File:")
		groups[group] += f[0]
		fileKiB += f[1]
	}
	return groups, fileKiB
}

// stackGroup says which part of the stack pid belongs to ("" when none).
func stackGroup(n *node, pid int, workloads map[string]string) string {
	cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	cmd := string(bytes.ReplaceAll(cl, []byte{0}, []byte{' '}))
	switch {
	case n.cmd != nil && pid == n.cmd.Process.Pid:
		return "osd-daemon"
	case strings.Contains(string(cg), "/kubepods"):
		if m := podUIDPattern.FindStringSubmatch(string(cg)); m != nil {
			if w, ok := workloads[strings.ReplaceAll(m[1], "_", "-")]; ok {
				return w
			}
		}
		return "pods-other"
	case strings.Contains(cmd, "containerd-shim"):
		return "containerd-shims"
	case strings.HasPrefix(cmd, "containerd"):
		return "containerd"
	case strings.Contains(cmd, n.stateDir) || strings.Contains(cmd, n.runDir):
		return "osd-other"
	case strings.Contains(cmd, "ovsdb-server") || strings.Contains(cmd, "ovs-vswitchd"):
		return "openvswitch"
	case strings.HasPrefix(cmd, "libvirtd") || strings.HasPrefix(cmd, "virtlogd") || strings.Contains(cmd, "/usr/sbin/libvirtd"):
		return "libvirt"
	}
	return ""
}

// smapsRollupKiB is fields of a process's smaps_rollup ("Pss:", "Pss_File:"), in KiB, in
// the order asked, from one read (0 for a field it lacks or a process gone).
func smapsRollupKiB(pid int, fields ...string) []int {
	out := make([]int, len(fields))
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return out
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		for i, want := range fields {
			if f[0] == want {
				out[i], _ = strconv.Atoi(f[1])
			}
		}
	}
	return out
}

// podWorkloads maps every pod's UID to its workload's name, namespace/name: the
// Deployment's for a ReplicaSet's pod, the DaemonSet's, StatefulSet's or Job's, else the
// pod's own.
func podWorkloads(n *node) map[string]string {
	out := map[string]string{}
	raw, err := n.kubectl("get", "pods", "-A", "-o", "json")
	if err != nil {
		return out
	}
	var list struct {
		Items []struct {
			Metadata struct {
				UID, Name, Namespace string
				OwnerReferences      []struct{ Kind, Name string }
			}
		}
	}
	if i := strings.IndexByte(raw, '{'); i > 0 {
		raw = raw[i:]
	}
	if json.Unmarshal([]byte(raw), &list) != nil {
		return out
	}
	for _, p := range list.Items {
		name := p.Metadata.Name
		for _, o := range p.Metadata.OwnerReferences {
			name = o.Name
			if o.Kind == "ReplicaSet" {
				if i := strings.LastIndexByte(name, '-'); i > 0 {
					name = name[:i]
				}
			}
		}
		out[p.Metadata.UID] = p.Metadata.Namespace + "/" + name
	}
	return out
}

// pssTable is the groups as lines "MiB group", largest first, and their sum in KiB.
func pssTable(groups map[string]int) (string, int) {
	names := make([]string, 0, len(groups))
	total := 0
	for g, v := range groups {
		names = append(names, g)
		total += v
	}
	sort.Slice(names, func(i, j int) bool { return groups[names[i]] > groups[names[j]] })
	var b strings.Builder
	for _, g := range names {
		fmt.Fprintf(&b, "  %6.1f MiB  %s\n", float64(groups[g])/1024, g)
	}
	return b.String(), total
}
