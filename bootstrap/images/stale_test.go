package images

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestStaleWork(t *testing.T) {
	alive := func(pid int) bool { return pid == 200 }
	tests := []struct {
		name    string
		entries []string
		want    []string
	}{
		{name: "own builds stay", entries: []string{"openstack.100.123", "base.100.9.layer.tar"}},
		{name: "a running process's builds stay", entries: []string{"compute.200.5"}},
		{name: "a gone process's builds go", entries: []string{"openstack.300.1", "base.300.77.layer.tar", "compute.200.5"},
			want: []string{"openstack.300.1", "base.300.77.layer.tar"}},
		{name: "entries without a process id go", entries: []string{"openstack-123", "base-1700000000.layer.tar", "x"},
			want: []string{"openstack-123", "base-1700000000.layer.tar", "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := staleWork(tt.entries, 100, alive); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("staleWork(%v) = %v, want %v", tt.entries, got, tt.want)
			}
		})
	}
}

// TestCleanStaleWork leaves a build tree of a process that is gone, with a process still
// working in it (as a daemon killed mid-build leaves its tools) and, as root, a mount in
// it; and a build tree of this process. cleanStaleWork kills the worker, detaches the
// mount and removes the tree; this process's tree stays.
func TestCleanStaleWork(t *testing.T) {
	b := &Builder{StateDir: t.TempDir()}
	work := filepath.Join(b.StateDir, "work")
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(work, "openstack."+strconv.Itoa(gone.Process.Pid)+".42")
	own, err := os.MkdirTemp(mkdirAll(t, work), workName("base"))
	if err != nil {
		t.Fatal(err)
	}
	rootfs := mkdirAll(t, filepath.Join(stale, "rootfs"))
	worker := exec.Command("sleep", "300")
	worker.Dir = rootfs
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { worker.Wait(); close(exited) }()
	defer worker.Process.Kill()
	mounted := false
	if os.Geteuid() == 0 {
		if err := unix.Mount("tmpfs", rootfs, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatalf("mount tmpfs: %v", err)
		}
		mounted = true
		defer unix.Unmount(rootfs, unix.MNT_DETACH)
	}

	if err := b.cleanStaleWork(); err != nil {
		t.Fatalf("cleanStaleWork() = %v", err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Error("the process working in the stale tree still runs")
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale tree %s: %v, want it removed", stale, err)
	}
	if mounted {
		if mps, _ := mountsUnder(stale); len(mps) > 0 {
			t.Errorf("mounts left in the stale tree: %v", mps)
		}
	}
	if _, err := os.Stat(own); err != nil {
		t.Errorf("this process's build tree: %v, want it kept", err)
	}
}

func mkdirAll(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
