package netsetup

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// NetnsDir is where containerd pins pod network namespaces (and where `ip netns` keeps its own).
const NetnsDir = "/run/netns"

// EnsureSharedNetnsDir makes /run/netns a shared mount point of its own before containerd pins
// any pod namespace there, as `ip netns add` does the first time it runs. Otherwise a later
// `ip netns add` on the host (an admin, a test, another tool) stacks a fresh bind mount over
// /run/netns: the pod namespaces pinned before it are hidden underneath, and every pod teardown
// then fails with "remove netns: unlinkat /run/netns/cni-...: device or resource busy".
func EnsureSharedNetnsDir() error {
	if err := os.MkdirAll(NetnsDir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", NetnsDir, err)
	}
	mounted, err := isMountPoint(NetnsDir)
	if err != nil {
		return err
	}
	if !mounted {
		// Recursive, so namespaces pinned by an earlier run stay reachable through the new mount.
		if err := unix.Mount(NetnsDir, NetnsDir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind-mount %s onto itself: %w", NetnsDir, err)
		}
	}
	err = unix.Mount("", NetnsDir, "", unix.MS_SHARED|unix.MS_REC, "")
	if errors.Is(err, unix.EINVAL) && mounted {
		// The mount table listed /run/netns, but that mount is hidden (a later mount over
		// /run, as in a private mount namespace): the visible directory is no mount point.
		if err = unix.Mount(NetnsDir, NetnsDir, "", unix.MS_BIND|unix.MS_REC, ""); err == nil {
			err = unix.Mount("", NetnsDir, "", unix.MS_SHARED|unix.MS_REC, "")
		}
	}
	if err != nil {
		return fmt.Errorf("make %s a shared mount: %w", NetnsDir, err)
	}
	return nil
}

// mountInfo is this thread's mount table. /proc/self names the thread group leader, whose mount
// namespace differs from the calling thread's when that thread unshared its own (a locked
// thread in a test or a helper): the table has to be the one the mount calls act on.
const mountInfo = "/proc/thread-self/mountinfo"

// isMountPoint reports whether path is the mount point of a mount in this mount namespace.
func isMountPoint(path string) (bool, error) {
	f, err := os.Open(mountInfo)
	if err != nil {
		return false, fmt.Errorf("read mount table: %w", err)
	}
	defer f.Close()
	return mountInfoHas(bufio.NewScanner(f), path)
}

// mountInfoHas reports whether a /proc/PID/mountinfo listing has a mount at path.
func mountInfoHas(sc *bufio.Scanner, path string) (bool, error) {
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && unescapeMountPath(fields[4]) == path {
			return true, nil
		}
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("read mount table: %w", err)
	}
	return false, nil
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space, ...).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountEntry is one line of /proc/self/mountinfo: its ID, its parent's, its mount point.
type mountEntry struct {
	id, parent string
	point      string
}

func readMounts() ([]mountEntry, error) {
	f, err := os.Open(mountInfo)
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	defer f.Close()
	var out []mountEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) > 4 {
			out = append(out, mountEntry{id: fs[0], parent: fs[1], point: unescapeMountPath(fs[4])})
		}
	}
	return out, sc.Err()
}

// hiddenNetns says whether some pod namespace pin under /run/netns is hidden by a mount of
// /run/netns itself stacked after it: its parent is not the topmost /run/netns mount.
func hiddenNetns(ms []mountEntry) bool {
	top := ""
	for _, m := range ms {
		if m.point == NetnsDir {
			top = m.id // later lines are mounted on top of earlier ones
		}
	}
	for _, m := range ms {
		if strings.HasPrefix(m.point, NetnsDir+"/cni-") && m.parent != top && top != "" {
			return true
		}
	}
	return false
}

// unpinHiddenNetns detaches the /run/netns mounts stacked over pod namespace pins until none is
// hidden, and unpins those pod namespaces (osd reset: every pod is gone by then).
// It returns how many pins it removed.
func UnpinHiddenNetns() (int, error) {
	n := 0
	for i := 0; i < 8; i++ {
		ms, err := readMounts()
		if err != nil {
			return n, err
		}
		if !hiddenNetns(ms) {
			return n, nil
		}
		if err := unix.Unmount(NetnsDir, unix.MNT_DETACH); err != nil {
			return n, fmt.Errorf("detach the mount stacked on %s: %w", NetnsDir, err)
		}
		ms, err = readMounts()
		if err != nil {
			return n, err
		}
		for _, m := range ms {
			if strings.HasPrefix(m.point, NetnsDir+"/cni-") {
				if unix.Unmount(m.point, unix.MNT_DETACH) == nil {
					os.Remove(m.point)
					n++
				}
			}
		}
	}
	return n, fmt.Errorf("%s: pod namespaces still hidden after 8 rounds", NetnsDir)
}

// RemoveOVNNamespaces removes the network namespaces the OVN metadata agent made
// (ovnmeta-*) and returns their names.
func RemoveOVNNamespaces() ([]string, error) {
	ents, err := os.ReadDir(NetnsDir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range ents {
		if !IsOVNNamespace(e.Name()) {
			continue
		}
		p := filepath.Join(NetnsDir, e.Name())
		unix.Unmount(p, unix.MNT_DETACH)
		if err := os.Remove(p); err != nil {
			errs = append(errs, fmt.Errorf("remove namespace %s: %w", e.Name(), err))
			continue
		}
		removed = append(removed, e.Name())
	}
	return removed, errors.Join(errs...)
}

// IsOVNNamespace says whether a network namespace is one the OVN metadata agent made.
func IsOVNNamespace(name string) bool { return strings.HasPrefix(name, "ovnmeta-") }
