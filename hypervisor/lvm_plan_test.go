package hypervisor

import (
	"slices"
	"testing"
)

func TestPlanVolumeGroup(t *testing.T) {
	spec := VGSpec{Name: "cinder-volumes", BackingFile: "/var/lib/osd/cinder-volumes.img", SizeBytes: 1 << 30}
	tests := []struct {
		name    string
		obs     VGObserved
		want    []VGOp
		wantErr bool
	}{
		{"fresh host", VGObserved{}, []VGOp{OpCreateFile, OpAttachLoop}, false},
		{"operator's own VG on a disk", VGObserved{VGExists: true}, nil, false},
		{"after reboot: file without loop", VGObserved{FileExists: true}, []VGOp{OpAttachLoop}, false},
		{"loop attached, empty", VGObserved{FileExists: true, LoopDevice: "/dev/loop0"}, []VGOp{OpCreatePV, OpCreateVG}, false},
		{"crash after pvcreate", VGObserved{FileExists: true, LoopDevice: "/dev/loop0", PVOnLoop: true}, []VGOp{OpCreateVG}, false},
		{"converged", VGObserved{FileExists: true, LoopDevice: "/dev/loop0", PVOnLoop: true, PVVG: "cinder-volumes", VGExists: true}, nil, false},
		{"PV of another VG", VGObserved{FileExists: true, LoopDevice: "/dev/loop0", PVOnLoop: true, PVVG: "other"}, nil, true},
		{"name taken elsewhere, file empty", VGObserved{FileExists: true, LoopDevice: "/dev/loop0", VGExists: true}, nil, true},
		{"name taken elsewhere, orphan PV", VGObserved{FileExists: true, LoopDevice: "/dev/loop0", PVOnLoop: true, VGExists: true}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PlanVolumeGroup(spec, tt.obs)
			if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
				t.Errorf("PlanVolumeGroup(%+v) = %v, %v, want %v, error %v", tt.obs, got, err, tt.want, tt.wantErr)
			}
		})
	}
}
