package preflight

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// process is one entry of /proc.
type process struct {
	pid  int
	comm string
	exe  string // "" when unreadable (kernel threads, or not root)
}

func scanProcesses(cfg ProbeConfig) ([]process, error) {
	entries, err := os.ReadDir(cfg.ProcRoot)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var ps []process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join(cfg.ProcRoot, e.Name())
		comm, err := os.ReadFile(filepath.Join(dir, "comm"))
		if err != nil {
			continue // exited meanwhile
		}
		exe, _ := os.Readlink(filepath.Join(dir, "exe"))
		ps = append(ps, process{pid: pid, comm: strings.TrimSpace(string(comm)), exe: strings.TrimSuffix(exe, " (deleted)")})
	}
	return ps, nil
}

// isSelf reports whether p is osd itself: one of SelfPIDs, running osd's own
// executable (the embedded k3s re-executes it as containerd and friends), or
// an executable under osd's state dir.
func isSelf(p process, cfg ProbeConfig) bool {
	if slices.Contains(cfg.SelfPIDs, p.pid) {
		return true
	}
	if p.exe == "" {
		return false
	}
	if cfg.SelfExe != "" && p.exe == cfg.SelfExe {
		return true
	}
	if cfg.StateDir != "" {
		state := filepath.Clean(cfg.StateDir) + string(filepath.Separator)
		if strings.HasPrefix(p.exe, state) {
			return true
		}
	}
	return false
}

// conflictName maps a process or executable name to the Kubernetes
// distribution or runtime it belongs to, "" when it is none of them.
func conflictName(name string) string {
	switch {
	case name == "kubelet", name == "kube-apiserver", name == "dockerd", name == "containerd", name == "k0s":
		return name
	case strings.HasPrefix(name, "k3s"):
		return "k3s"
	case strings.HasPrefix(name, "rke2"):
		return "rke2"
	}
	return ""
}

// conflicts lists foreign Kubernetes and container runtime processes, one
// entry per distinct (name, executable), e.g. "k3s (pid 812, /usr/local/bin/k3s)".
func conflicts(ps []process, cfg ProbeConfig) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range ps {
		if isSelf(p, cfg) {
			continue
		}
		name := ""
		if p.exe != "" {
			name = conflictName(filepath.Base(p.exe))
		}
		if name == "" {
			name = conflictName(p.comm)
		}
		if name == "" || seen[name+"\x00"+p.exe] {
			continue
		}
		seen[name+"\x00"+p.exe] = true
		desc := fmt.Sprintf("%s (pid %d", name, p.pid)
		if p.exe != "" {
			desc += ", " + p.exe
		}
		out = append(out, desc+")")
	}
	return out
}

// listeningInodes reads /proc/net/tcp and tcp6 and returns the socket inodes
// listening on each wanted port (any address).
func listeningInodes(procRoot string, ports []int) (map[int][]string, error) {
	want := map[int]bool{}
	for _, p := range ports {
		want[p] = true
	}
	out := map[int][]string{}
	for _, name := range []string{"net/tcp", "net/tcp6"} {
		file, err := os.Open(filepath.Join(procRoot, name))
		if err != nil {
			if name == "net/tcp6" && os.IsNotExist(err) {
				continue // IPv6 disabled
			}
			return nil, fmt.Errorf("read listening sockets: %w", err)
		}
		sc := bufio.NewScanner(file)
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			f := strings.Fields(sc.Text())
			if len(f) < 10 || f[3] != "0A" { // 0A = TCP_LISTEN
				continue
			}
			_, hexPort, ok := strings.Cut(f[1], ":")
			if !ok {
				continue
			}
			port, err := strconv.ParseUint(hexPort, 16, 16)
			if err != nil || !want[int(port)] {
				continue
			}
			out[int(port)] = append(out[int(port)], f[9])
		}
		file.Close()
	}
	return out, nil
}

// probePorts says who listens on each configured port. Only when some port
// is taken does it walk /proc/*/fd to map socket inodes to processes.
func probePorts(cfg ProbeConfig, ps []process) (map[int]string, map[int]bool, error) {
	holders := make(map[int]string, len(cfg.Ports))
	self := map[int]bool{}
	for _, p := range cfg.Ports {
		holders[p] = ""
	}
	inodes, err := listeningInodes(cfg.ProcRoot, cfg.Ports)
	if err != nil {
		return nil, nil, err // unknown, not free: Evaluate reports "not probed"
	}
	if len(inodes) == 0 {
		return holders, self, nil
	}
	owner := map[string]process{} // "socket:[inode]" -> process
	for _, list := range inodes {
		for _, ino := range list {
			owner["socket:["+ino+"]"] = process{}
		}
	}
	for _, p := range ps {
		fdDir := filepath.Join(cfg.ProcRoot, strconv.Itoa(p.pid), "fd")
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
			if err != nil {
				continue
			}
			if o, ok := owner[link]; ok && o.pid == 0 {
				owner[link] = p
			}
		}
	}
	for port, list := range inodes {
		var found process
		for _, ino := range list {
			if o := owner["socket:["+ino+"]"]; o.pid != 0 {
				found = o
				break
			}
		}
		if found.pid == 0 {
			holders[port] = "an unknown process (socket inode " + list[0] + ")"
			continue
		}
		holders[port] = fmt.Sprintf("%s (pid %d)", found.comm, found.pid)
		if isSelf(found, cfg) {
			self[port] = true
		}
	}
	return holders, self, nil
}
