package hypervisor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// KVMGroup and KVMMode are what libvirt expects of /dev/kvm. Left root 0600
// (no udev), libvirt re-probes QEMU on every call (~50 s per call).
const (
	KVMGroup             = "kvm"
	KVMMode  fs.FileMode = 0o660
)

// DefaultKVMDevice is the KVM device node.
const DefaultKVMDevice = "/dev/kvm"

// EnsureKVMPermissions makes the character device at path owned by group kvm
// with mode 0660, changing only what differs. A missing device is not an error
// (changed=false, nil): there is nothing to fix. A missing kvm group is an
// error; it is not created here (the qemu/libvirt packages create it).
func EnsureKVMPermissions(path string) (changed bool, err error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stat kvm device: %w", err)
	}
	if fi.Mode()&fs.ModeCharDevice == 0 {
		return false, fmt.Errorf("%s is not a character device", path)
	}
	grp, err := user.LookupGroup(KVMGroup)
	if err != nil {
		return false, fmt.Errorf("look up group %s (create it with groupadd --system %s): %w", KVMGroup, KVMGroup, err)
	}
	gid, err := strconv.Atoi(grp.Gid)
	if err != nil {
		return false, fmt.Errorf("parse gid of group %s: %w", KVMGroup, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false, fmt.Errorf("stat %s: no owner information", path)
	}
	if int(st.Gid) != gid {
		if err := os.Chown(path, -1, gid); err != nil {
			return false, fmt.Errorf("chgrp %s %s: %w", KVMGroup, path, err)
		}
		changed = true
	}
	if fi.Mode().Perm() != KVMMode {
		if err := os.Chmod(path, KVMMode); err != nil {
			return changed, fmt.Errorf("chmod %o %s: %w", KVMMode, path, err)
		}
		changed = true
	}
	return changed, nil
}
