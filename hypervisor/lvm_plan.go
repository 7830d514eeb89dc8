package hypervisor

import "fmt"

// DefaultVGName is the volume group Cinder's LVM driver uses by default.
const DefaultVGName = "cinder-volumes"

// VGSpec is a loop-file-backed LVM volume group.
type VGSpec struct {
	Name        string // e.g. cinder-volumes
	BackingFile string // sparse file holding the PV, e.g. <state>/cinder-volumes.img
	SizeBytes   int64  // size of a newly created backing file; an existing file is not resized
}

// VGObserved is the host state relevant to one VGSpec.
type VGObserved struct {
	FileExists bool
	LoopDevice string // a loop device attached to the backing file, "" if none
	PVOnLoop   bool   // LoopDevice carries an LVM physical volume
	PVVG       string // the volume group of that PV, "" for an orphan PV
	VGExists   bool   // a volume group named spec.Name exists (on any PV)
}

// VGOp is one step that converges the host towards a VGSpec.
type VGOp string

const (
	OpCreateFile VGOp = "create-file" // sparse backing file
	OpAttachLoop VGOp = "attach-loop" // losetup --find --show FILE
	OpCreatePV   VGOp = "pvcreate"
	OpCreateVG   VGOp = "vgcreate"
)

// PlanVolumeGroup returns the ops that take the observed state to the spec,
// in order; none when converged. Nothing about LVM can be seen while the file
// has no loop device, so a plan that attaches the loop ends there and the
// caller plans again afterwards (after a reboot the loop is re-attached and
// LVM then finds the existing PV and VG on it).
//
// A volume group of that name that exists while the backing file does not is
// taken to be the operator's own (on a real disk) and left alone.
func PlanVolumeGroup(s VGSpec, o VGObserved) ([]VGOp, error) {
	if !o.FileExists {
		if o.VGExists {
			return nil, nil
		}
		return []VGOp{OpCreateFile, OpAttachLoop}, nil
	}
	if o.LoopDevice == "" {
		return []VGOp{OpAttachLoop}, nil
	}
	switch {
	case !o.PVOnLoop && o.VGExists:
		return nil, fmt.Errorf("volume group %s exists on other devices while %s (%s) is empty: remove the file or choose another name", s.Name, s.BackingFile, o.LoopDevice)
	case !o.PVOnLoop:
		return []VGOp{OpCreatePV, OpCreateVG}, nil
	case o.PVVG == s.Name:
		return nil, nil
	case o.PVVG != "":
		return nil, fmt.Errorf("%s (%s) belongs to volume group %s, not %s", o.LoopDevice, s.BackingFile, o.PVVG, s.Name)
	case o.VGExists:
		return nil, fmt.Errorf("volume group %s exists on other devices while the PV on %s is orphaned", s.Name, o.LoopDevice)
	default:
		return []VGOp{OpCreateVG}, nil
	}
}
