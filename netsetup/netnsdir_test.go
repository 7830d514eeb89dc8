package netsetup

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestMountInfoHas(t *testing.T) {
	info := `27 1 0:25 / /run rw,nosuid - tmpfs tmpfs rw
503 27 254:0 /run/netns /run/netns rw,relatime shared:25 - ext4 /dev/vda rw
600 27 0:4 net:[1] /run/my\040dir rw - nsfs nsfs rw
`
	for _, tt := range []struct {
		path string
		want bool
	}{
		{"/run/netns", true},
		{"/run", true},
		{"/run/my dir", true},
		{"/run/net", false},
		{"/var/run/netns", false},
	} {
		got, err := mountInfoHas(bufio.NewScanner(strings.NewReader(info)), tt.path)
		if err != nil || got != tt.want {
			t.Errorf("mountInfoHas(%q) = %v, %v, want %v", tt.path, got, err, tt.want)
		}
	}
}

func TestHiddenNetns(t *testing.T) {
	for _, tt := range []struct {
		name string
		ms   []mountEntry
		want bool
	}{
		{"no netns mount", []mountEntry{{"27", "1", "/run"}, {"44", "27", "/run/netns/cni-a"}}, false},
		{"pins on top mount", []mountEntry{{"27", "1", "/run"}, {"503", "27", "/run/netns"}, {"545", "503", "/run/netns/cni-a"}}, false},
		{"pin under stacked mount", []mountEntry{{"27", "1", "/run"}, {"44", "27", "/run/netns/cni-a"}, {"503", "27", "/run/netns"}, {"545", "503", "/run/netns/cni-b"}}, true},
		{"two stacked mounts", []mountEntry{{"27", "1", "/run"}, {"503", "27", "/run/netns"}, {"545", "503", "/run/netns/cni-a"}, {"600", "503", "/run/netns"}}, true},
	} {
		if got := hiddenNetns(tt.ms); got != tt.want {
			t.Errorf("hiddenNetns(%s) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestSharedNetnsDirSurvivesIPNetnsAdd runs in a private mount namespace (this test's
// thread only) with a fresh /run: after EnsureSharedNetnsDir, a pod namespace pin stays
// visible when `ip netns add` runs later (without it, ip stacks a new mount over /run/netns
// and hides the pin, which is what broke pod teardown).
func TestSharedNetnsDirSurvivesIPNetnsAdd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (mount namespaces)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("ip is not installed (test/deps.sh installs iproute2): %v", err)
	}
	done := make(chan error, 1)
	go func() {
		// The thread's mount namespace is private and dies with it: never unlock it.
		runtime.LockOSThread()
		done <- func() error {
			if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
				return fmt.Errorf("unshare: %w", err)
			}
			if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
				return fmt.Errorf("make / private: %w", err)
			}
			if err := unix.Mount("tmpfs", "/run", "tmpfs", 0, "size=16m"); err != nil {
				return fmt.Errorf("tmpfs on /run: %w", err)
			}
			if err := EnsureSharedNetnsDir(); err != nil {
				return err
			}
			if err := EnsureSharedNetnsDir(); err != nil { // idempotent
				return fmt.Errorf("second call: %w", err)
			}
			pin := NetnsDir + "/cni-osd-test"
			if err := os.WriteFile(pin, nil, 0o444); err != nil {
				return err
			}
			if err := unix.Mount("/proc/self/ns/net", pin, "", unix.MS_BIND, ""); err != nil {
				return fmt.Errorf("pin a namespace: %w", err)
			}
			if out, err := exec.Command("ip", "netns", "add", "osd-test-late").CombinedOutput(); err != nil {
				return fmt.Errorf("ip netns add: %v: %s", err, out)
			}
			ms, err := readMounts()
			if err != nil {
				return err
			}
			// Only this test's pin: the table also lists the host's /run/netns mounts (hidden
			// under the tmpfs here), pod pins of a cloud running on the host included.
			if hiddenNetns(onlyPin(ms, pin)) {
				return fmt.Errorf("the pod namespace pin is hidden after ip netns add")
			}
			if err := unix.Unmount(pin, 0); err != nil {
				return fmt.Errorf("unpin (what containerd does at teardown): %w", err)
			}
			if err := os.Remove(pin); err != nil {
				return fmt.Errorf("remove the pin (failed with EBUSY before the fix): %w", err)
			}
			return nil
		}()
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// onlyPin keeps the /run/netns mounts and the one pin, dropping every other pin.
func onlyPin(ms []mountEntry, pin string) []mountEntry {
	var out []mountEntry
	for _, m := range ms {
		if m.point == NetnsDir || m.point == pin {
			out = append(out, m)
		}
	}
	return out
}
