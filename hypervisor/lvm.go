package hypervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// lvmConfig turns udev synchronisation off when no udev daemon runs (as on
// the osd build machines); otherwise every LVM command waits for udev events
// that never come. Device-mapper being absent (also the case there), only
// metadata commands work: pvcreate, vgcreate, vgs, vgremove; lvcreate fails
// with "Required device-mapper target(s) not detected".
const lvmNoUdevConfig = "activation { udev_sync=0 udev_rules=0 } devices { obtain_device_list_from_udev=0 }"

func udevRunning() bool {
	_, err := os.Stat("/run/udev/control")
	return err == nil
}

// runLVM runs one lvm2 tool and returns its stdout.
func runLVM(ctx context.Context, tool string, args ...string) ([]byte, error) {
	if !udevRunning() {
		args = append([]string{"--config", lvmNoUdevConfig}, args...)
	}
	cmd := exec.CommandContext(ctx, tool, args...)
	cmd.Env = append(os.Environ(), "LVM_SUPPRESS_FD_WARNINGS=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", tool, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

func run(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(ee.Stderr)))
		}
		return nil, fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return out, nil
}

// LoopDevicesFor lists the loop devices attached to file.
func LoopDevicesFor(ctx context.Context, file string) ([]string, error) {
	want, err := canonical(file)
	if err != nil {
		return nil, err
	}
	out, err := run(ctx, "losetup", "--list", "--json", "--output", "NAME,BACK-FILE")
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(out)) == 0 { // no loop devices at all
		return nil, nil
	}
	var list struct {
		Loops []struct {
			Name     string `json:"name"`
			BackFile string `json:"back-file"`
		} `json:"loopdevices"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("parse losetup output: %w", err)
	}
	var devs []string
	for _, l := range list.Loops {
		if strings.TrimSuffix(l.BackFile, " (deleted)") == want {
			devs = append(devs, l.Name)
		}
	}
	return devs, nil
}

// canonical resolves symlinks in the directory part of file, as the kernel
// reports a loop's backing file.
func canonical(file string) (string, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return "", err
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return abs, nil
		}
		return "", err
	}
	return filepath.Join(dir, filepath.Base(abs)), nil
}

type lvmReport struct {
	Report []struct {
		PV []struct {
			Name string `json:"pv_name"`
			VG   string `json:"vg_name"`
		} `json:"pv"`
		VG []struct {
			Name string `json:"vg_name"`
		} `json:"vg"`
	} `json:"report"`
}

// ObserveVolumeGroup reads the state PlanVolumeGroup decides on.
func ObserveVolumeGroup(ctx context.Context, s VGSpec) (VGObserved, error) {
	var o VGObserved
	if _, err := os.Stat(s.BackingFile); err == nil {
		o.FileExists = true
	} else if !errors.Is(err, fs.ErrNotExist) {
		return o, fmt.Errorf("stat backing file: %w", err)
	}
	if o.FileExists {
		loops, err := LoopDevicesFor(ctx, s.BackingFile)
		if err != nil {
			return o, err
		}
		if len(loops) > 0 {
			o.LoopDevice = loops[0]
		}
	}
	out, err := runLVM(ctx, "vgs", "--reportformat", "json", "-o", "vg_name")
	if err != nil {
		return o, err
	}
	var vgs lvmReport
	if err := json.Unmarshal(out, &vgs); err != nil {
		return o, fmt.Errorf("parse vgs output: %w", err)
	}
	for _, r := range vgs.Report {
		for _, vg := range r.VG {
			if vg.Name == s.Name {
				o.VGExists = true
			}
		}
	}
	if o.LoopDevice == "" {
		return o, nil
	}
	out, err = runLVM(ctx, "pvs", "--reportformat", "json", "-o", "pv_name,vg_name")
	if err != nil {
		return o, err
	}
	var pvs lvmReport
	if err := json.Unmarshal(out, &pvs); err != nil {
		return o, fmt.Errorf("parse pvs output: %w", err)
	}
	for _, r := range pvs.Report {
		for _, pv := range r.PV {
			if pv.Name == o.LoopDevice {
				o.PVOnLoop, o.PVVG = true, pv.VG
			}
		}
	}
	return o, nil
}

// EnsureVolumeGroup converges the host to s: a sparse backing file, a loop
// device on it, a PV on the loop and the VG on the PV. It is idempotent: on a
// converged host it changes nothing; after a reboot it re-attaches the loop.
// It works without device-mapper too (LVM metadata only), but logical
// volumes then cannot be created: call it only where preflight decided the
// lvm storage backend.
func EnsureVolumeGroup(ctx context.Context, s VGSpec) (changed bool, err error) {
	if s.Name == "" || s.BackingFile == "" {
		return false, errors.New("volume group spec needs a name and a backing file")
	}
	for range 4 { // each round ends at most at an attach; three suffice
		o, err := ObserveVolumeGroup(ctx, s)
		if err != nil {
			return changed, err
		}
		ops, err := PlanVolumeGroup(s, o)
		if err != nil {
			return changed, err
		}
		if len(ops) == 0 {
			return changed, nil
		}
		for _, op := range ops {
			slog.Info("volume group step", "vg", s.Name, "op", op, "file", s.BackingFile)
			if err := applyVGOp(ctx, s, op, &o); err != nil {
				return changed, err
			}
			changed = true
		}
	}
	return changed, fmt.Errorf("volume group %s did not converge", s.Name)
}

func applyVGOp(ctx context.Context, s VGSpec, op VGOp, o *VGObserved) error {
	switch op {
	case OpCreateFile:
		if s.SizeBytes <= 0 {
			return fmt.Errorf("volume group %s: size must be positive", s.Name)
		}
		if err := os.MkdirAll(filepath.Dir(s.BackingFile), 0o700); err != nil {
			return fmt.Errorf("create backing file directory: %w", err)
		}
		f, err := os.OpenFile(s.BackingFile, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return fmt.Errorf("create backing file: %w", err)
		}
		if err := f.Truncate(s.SizeBytes); err != nil {
			f.Close()
			return fmt.Errorf("size backing file: %w", err)
		}
		return f.Close()
	case OpAttachLoop:
		out, err := run(ctx, "losetup", "--find", "--show", s.BackingFile)
		if err != nil {
			return err
		}
		o.LoopDevice = strings.TrimSpace(string(out))
		return nil
	case OpCreatePV:
		_, err := runLVM(ctx, "pvcreate", "--yes", o.LoopDevice)
		return err
	case OpCreateVG:
		_, err := runLVM(ctx, "vgcreate", "--yes", s.Name, o.LoopDevice)
		return err
	}
	return fmt.Errorf("unknown volume group op %q", op)
}

// RemoveVolumeGroup undoes EnsureVolumeGroup: vgremove, pvremove, detach every
// loop device on the backing file, delete the file. A volume group that does
// not live on the backing file (an operator's own) is not touched.
func RemoveVolumeGroup(ctx context.Context, s VGSpec) error {
	o, err := ObserveVolumeGroup(ctx, s)
	if err != nil {
		return err
	}
	if !o.FileExists {
		return nil
	}
	if o.PVOnLoop && o.PVVG != "" && o.PVVG != s.Name {
		return fmt.Errorf("%s (%s) belongs to volume group %s, not %s: not removing it", o.LoopDevice, s.BackingFile, o.PVVG, s.Name)
	}
	if o.PVOnLoop && o.PVVG == s.Name {
		if _, err := runLVM(ctx, "vgremove", "--force", s.Name); err != nil {
			return err
		}
	}
	if o.PVOnLoop {
		if _, err := runLVM(ctx, "pvremove", "--force", "--force", "--yes", o.LoopDevice); err != nil {
			return err
		}
	}
	loops, err := LoopDevicesFor(ctx, s.BackingFile)
	if err != nil {
		return err
	}
	for _, dev := range loops {
		if _, err := run(ctx, "losetup", "--detach", dev); err != nil {
			return err
		}
	}
	if err := os.Remove(s.BackingFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove backing file: %w", err)
	}
	return nil
}
