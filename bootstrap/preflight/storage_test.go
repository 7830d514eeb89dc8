package preflight

import (
	"strings"
	"testing"
)

func TestStorageSize(t *testing.T) {
	tests := []struct {
		name                     string
		requested, free, current int64
		want                     int64
		wantErr                  string
	}{
		{name: "default: a quarter of the free space", free: 80 * gib, want: 20 * gib},
		{name: "default rounds down to GiB", free: 81 * gib, want: 20 * gib},
		{name: "default at least the minimum", free: 10 * gib, want: MinStorageBytes},
		{name: "default capped", free: 2000 * gib, want: MaxDefaultStorageBytes},
		{name: "no room at all", free: 3 * gib, wantErr: "only 3.0 GiB free under the state dir: block storage needs at least 4.0 GiB"},
		{name: "keeps the current size", free: 500 * gib, current: 12 * gib, want: 12 * gib},
		{name: "asked", requested: 50 * gib, free: 100 * gib, want: 50 * gib},
		{name: "below the minimum", requested: 2 * gib, free: 100 * gib, wantErr: "storage size 2.0 GiB is below the minimum of 4.0 GiB"},
		{name: "larger than the disk", requested: 200 * gib, free: 100 * gib, wantErr: "storage size 200.0 GiB does not fit: 100.0 GiB free"},
		{name: "grows", requested: 30 * gib, free: 10 * gib, current: 20 * gib, want: 30 * gib},
		{name: "grows beyond the disk", requested: 40 * gib, free: 10 * gib, current: 20 * gib, wantErr: "does not fit: 30.0 GiB free"},
		{name: "never shrinks", requested: 10 * gib, free: 100 * gib, current: 20 * gib, wantErr: "can grow but not shrink"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := StorageSize(tt.requested, tt.free, tt.current)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("StorageSize(%d, %d, %d) = %d, %v, want error %q", tt.requested, tt.free, tt.current, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("StorageSize(%d, %d, %d) = %d, %v, want %d", tt.requested, tt.free, tt.current, got, err, tt.want)
			}
		})
	}
}

func TestDecideStorage(t *testing.T) {
	all := Facts{DeviceMapper: true, DeviceMapperState: "loaded", ISCSITarget: true, ISCSITargetState: "loadable", ISCSIInitiator: true, ISCSIInitiatorState: "loaded"}
	tests := []struct {
		name   string
		change func(*Facts)
		want   string
		reason string
	}{
		{name: "device-mapper and iSCSI", change: func(*Facts) {}, want: StorageLVM, reason: "exported over iSCSI"},
		{name: "no device-mapper", change: func(f *Facts) { f.DeviceMapper = false }, want: StorageCeph, reason: "no device-mapper (LVM cannot make logical volumes): Cinder and Glance on a single-node Ceph"},
		{name: "no target", change: func(f *Facts) { f.ISCSITarget = false }, want: StorageCeph, reason: "no iSCSI target (LIO)"},
		{name: "no initiator", change: func(f *Facts) { f.ISCSIInitiator = false }, want: StorageCeph, reason: "no iSCSI initiator (iscsi_tcp)"},
		{name: "nothing (this kind of VM)", change: func(f *Facts) { *f = Facts{} }, want: StorageCeph, reason: "no device-mapper (LVM cannot make logical volumes), no iSCSI target (LIO) to export them, no iSCSI initiator"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := all
			tt.change(&f)
			d := Decide(f)
			if d.StorageBackend != tt.want || !strings.Contains(d.StorageBackendReason, tt.reason) {
				t.Errorf("Decide(%s) storage = %s (%s), want %s (%s)", tt.name, d.StorageBackend, d.StorageBackendReason, tt.want, tt.reason)
			}
		})
	}
}

func TestCheckQEMURBD(t *testing.T) {
	f := Facts{Packages: map[string]bool{}}
	r := Requirements{QEMURBDPackage: "qemu-block-extra"}
	fs := Evaluate(f, r)
	var got *Finding
	for i := range fs {
		if fs[i].Check == CheckQEMURBD {
			got = &fs[i]
		}
	}
	if got == nil || got.Status != Fail || got.Fix != "apt-get install -y qemu-block-extra" {
		t.Fatalf("Evaluate(ceph, no qemu-block-extra) qemu_rbd = %+v, want a failure with its fix", got)
	}
	f.Packages["qemu-block-extra"] = true
	for _, fd := range Evaluate(f, r) {
		if fd.Check == CheckQEMURBD && fd.Status != OK {
			t.Errorf("Evaluate(ceph, qemu-block-extra) qemu_rbd = %+v, want ok", fd)
		}
	}
	lvm := Facts{DeviceMapper: true, ISCSITarget: true, ISCSIInitiator: true, Packages: map[string]bool{}}
	for _, fd := range Evaluate(lvm, r) {
		if fd.Check == CheckQEMURBD {
			t.Errorf("Evaluate(lvm) has a qemu_rbd finding %+v, want none (only Ceph needs QEMU's RBD driver)", fd)
		}
	}
}
