package daemon

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// netnsDir is where containerd pins pod network namespaces (and where `ip netns` keeps its own).
const netnsDir = "/run/netns"

// ensureSharedNetnsDir makes /run/netns a shared mount point of its own before containerd pins
// any pod namespace there, as `ip netns add` does the first time it runs. Otherwise a later
// `ip netns add` on the host (an admin, a test, another tool) stacks a fresh bind mount over
// /run/netns: the pod namespaces pinned before it are hidden underneath, and every pod teardown
// then fails with "remove netns: unlinkat /run/netns/cni-...: device or resource busy".
func ensureSharedNetnsDir() error {
	if err := os.MkdirAll(netnsDir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", netnsDir, err)
	}
	mounted, err := isMountPoint(netnsDir)
	if err != nil {
		return err
	}
	if !mounted {
		// Recursive, so namespaces pinned by an earlier run stay reachable through the new mount.
		if err := unix.Mount(netnsDir, netnsDir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind-mount %s onto itself: %w", netnsDir, err)
		}
	}
	if err := unix.Mount("", netnsDir, "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("make %s a shared mount: %w", netnsDir, err)
	}
	return nil
}

// isMountPoint reports whether path is the mount point of a mount in this mount namespace.
func isMountPoint(path string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
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
