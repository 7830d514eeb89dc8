package hypervisor

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func kvmGID(t *testing.T) int {
	t.Helper()
	g, err := user.LookupGroup(KVMGroup)
	if err != nil {
		t.Fatalf("group %s absent (test/deps.sh installs qemu-system-x86 and libvirt-daemon-system): %v", KVMGroup, err)
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil {
		t.Fatal(err)
	}
	return gid
}

func ownerMode(t *testing.T, path string) (uint32, os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Gid, fi.Mode()
}

// TestEnsureKVMPermissions runs on a real character device node made with
// mknod (10:232, the numbers of /dev/kvm) in a temp dir; /dev/kvm itself is
// not touched here.
func TestEnsureKVMPermissions(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mknod and chown need root")
	}
	gid := kvmGID(t)
	dev := filepath.Join(t.TempDir(), "kvm")
	if err := unix.Mknod(dev, unix.S_IFCHR|0o600, int(unix.Mkdev(10, 232))); err != nil {
		t.Skipf("mknod not permitted here: %v", err)
	}
	if err := os.Chown(dev, 0, 0); err != nil {
		t.Fatal(err)
	}

	changed, err := EnsureKVMPermissions(dev)
	if err != nil || !changed {
		t.Fatalf("EnsureKVMPermissions(root 0600) = %v, %v, want true, nil", changed, err)
	}
	g, mode := ownerMode(t, dev)
	if int(g) != gid || mode.Perm() != KVMMode || mode&os.ModeCharDevice == 0 {
		t.Fatalf("after fix: gid %d mode %v, want gid %d mode %v char device", g, mode, gid, KVMMode)
	}
	changed, err = EnsureKVMPermissions(dev)
	if err != nil || changed {
		t.Fatalf("EnsureKVMPermissions(already fixed) = %v, %v, want false, nil", changed, err)
	}

	// Only the mode is wrong.
	if err := os.Chmod(dev, 0o666); err != nil {
		t.Fatal(err)
	}
	if changed, err = EnsureKVMPermissions(dev); err != nil || !changed {
		t.Fatalf("EnsureKVMPermissions(kvm 0666) = %v, %v, want true, nil", changed, err)
	}
	if _, mode = ownerMode(t, dev); mode.Perm() != KVMMode {
		t.Fatalf("mode after fix = %v, want %v", mode.Perm(), KVMMode)
	}
}

func TestEnsureKVMPermissionsMissingAndWrongType(t *testing.T) {
	dir := t.TempDir()
	changed, err := EnsureKVMPermissions(filepath.Join(dir, "absent"))
	if err != nil || changed {
		t.Errorf("EnsureKVMPermissions(absent) = %v, %v, want false, nil", changed, err)
	}
	regular := filepath.Join(dir, "regular")
	if err := os.WriteFile(regular, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := EnsureKVMPermissions(regular); err == nil {
		t.Errorf("EnsureKVMPermissions(regular file) = %v, nil, want an error", changed)
	}
}
