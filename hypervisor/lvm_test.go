package hypervisor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func randomSuffix(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func needLVM(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loop devices and LVM need root")
	}
	for _, tool := range []string{"losetup", "pvcreate", "vgcreate", "vgs", "vgremove", "pvremove"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not installed (test/deps.sh installs lvm2 and mount): %v", tool, err)
		}
	}
}

// TestVolumeGroupOnLoopFile creates a real VG on a real loop device. Without
// device-mapper (the osd build machines) only LVM metadata works: the test
// shows that lvcreate fails there and does not fail on it.
func TestVolumeGroupOnLoopFile(t *testing.T) {
	needLVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	spec := VGSpec{
		Name:        "osdtest-" + randomSuffix(t),
		BackingFile: filepath.Join(t.TempDir(), "cinder-volumes.img"),
		SizeBytes:   256 << 20,
	}
	_, mapperErr := os.Stat("/dev/mapper/control")
	t.Cleanup(func() {
		if err := RemoveVolumeGroup(context.Background(), spec); err != nil {
			t.Errorf("cleanup: RemoveVolumeGroup: %v", err)
		}
		// libdevmapper creates this node even where the kernel has no
		// device-mapper; remove it again if this test made it.
		if errors.Is(mapperErr, fs.ErrNotExist) {
			os.Remove("/dev/mapper/control")
			os.Remove("/dev/mapper")
		}
	})

	start := time.Now()
	changed, err := EnsureVolumeGroup(ctx, spec)
	if err != nil || !changed {
		t.Fatalf("EnsureVolumeGroup(fresh) = %v, %v, want true, nil", changed, err)
	}
	t.Logf("volume group created in %s", time.Since(start))

	fi, err := os.Stat(spec.BackingFile)
	if err != nil || fi.Size() != spec.SizeBytes {
		t.Fatalf("backing file: %v, %v, want size %d", fi, err, spec.SizeBytes)
	}
	loops, err := LoopDevicesFor(ctx, spec.BackingFile)
	if err != nil || len(loops) != 1 {
		t.Fatalf("LoopDevicesFor = %v, %v, want one loop device", loops, err)
	}
	out, err := runLVM(ctx, "vgs", "--noheadings", "-o", "vg_name,pv_count,vg_size", "--units", "m", spec.Name)
	if err != nil {
		t.Fatalf("vgs %s: %v", spec.Name, err)
	}
	if f := strings.Fields(string(out)); len(f) < 2 || f[0] != spec.Name || f[1] != "1" {
		t.Fatalf("vgs %s = %q, want the VG with 1 PV", spec.Name, out)
	}
	t.Logf("vgs: %s", strings.TrimSpace(string(out)))

	start = time.Now()
	changed, err = EnsureVolumeGroup(ctx, spec)
	if err != nil || changed {
		t.Fatalf("EnsureVolumeGroup(converged) = %v, %v, want false, nil", changed, err)
	}
	t.Logf("converged check took %s", time.Since(start))

	// A reboot loses the loop device: detach it and ensure again.
	if _, err := run(ctx, "losetup", "--detach", loops[0]); err != nil {
		t.Fatal(err)
	}
	changed, err = EnsureVolumeGroup(ctx, spec)
	if err != nil || !changed {
		t.Fatalf("EnsureVolumeGroup(after loop detach) = %v, %v, want true, nil", changed, err)
	}
	if o, err := ObserveVolumeGroup(ctx, spec); err != nil || !o.VGExists || o.PVVG != spec.Name || o.LoopDevice == "" {
		t.Fatalf("ObserveVolumeGroup(after re-attach) = %+v, %v, want VG on the loop", o, err)
	}

	// Logical volumes need device-mapper in the kernel.
	if lv, err := runLVM(ctx, "lvcreate", "--yes", "--size", "8m", "--name", "probe", spec.Name); err != nil {
		t.Logf("lvcreate fails here (expected without device-mapper; only VG metadata works): %v", err)
	} else {
		t.Logf("lvcreate works here (device-mapper present): %s", lv)
	}

	if err := RemoveVolumeGroup(ctx, spec); err != nil {
		t.Fatalf("RemoveVolumeGroup: %v", err)
	}
	if o, err := ObserveVolumeGroup(ctx, spec); err != nil || o.VGExists || o.FileExists || o.LoopDevice != "" {
		t.Fatalf("ObserveVolumeGroup(after remove) = %+v, %v, want nothing left", o, err)
	}
	if loops, err := LoopDevicesFor(ctx, spec.BackingFile); err != nil || len(loops) != 0 {
		t.Fatalf("LoopDevicesFor(after remove) = %v, %v, want none", loops, err)
	}
	if err := RemoveVolumeGroup(ctx, spec); err != nil {
		t.Fatalf("RemoveVolumeGroup(again) = %v, want nil", err)
	}
}
