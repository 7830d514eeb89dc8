package preflight

import "github.com/osdcloud/osd/hypervisor"

// Storage backends for Cinder.
const (
	StorageLVM  = "lvm"  // loop-file-backed LVM volume group (cinder-volumes)
	StorageNone = "none" // no block storage service on this host
)

// OVS datapath types.
const (
	DatapathSystem = "system" // the openvswitch kernel module
	DatapathNetdev = "netdev" // userspace datapath
)

// Decisions are what host preparation configures, derived from facts alone.
type Decisions struct {
	VirtType             string `json:"virt_type"` // kvm | qemu
	VirtTypeReason       string `json:"virt_type_reason"`
	OVSDatapath          string `json:"ovs_datapath"` // system | netdev
	OVSDatapathReason    string `json:"ovs_datapath_reason"`
	StorageBackend       string `json:"storage_backend"` // lvm | none
	StorageBackendReason string `json:"storage_backend_reason"`
}

// Decide derives the host decisions from facts. It is pure.
//
// virt_type is kvm only when the CPU shows vmx or svm AND /dev/kvm exists; a
// /dev/kvm without them (PVM, as on the osd build machines) hangs guests, so
// it means qemu (TCG). OVS uses the kernel datapath when the openvswitch
// module is there, else the userspace netdev datapath. Cinder gets a
// loop-backed LVM volume group only where device-mapper exists: elsewhere
// vgcreate works but lvcreate fails, so no volume service is offered.
func Decide(f Facts) Decisions {
	var d Decisions
	hw := f.CPUVMX || f.CPUSVM
	d.VirtType = hypervisor.DecideVirtType(hw, f.KVMDevice)
	switch {
	case d.VirtType == hypervisor.VirtTypeKVM:
		d.VirtTypeReason = "CPU has " + hwName(f) + " and /dev/kvm exists"
	case hw:
		d.VirtTypeReason = "CPU has " + hwName(f) + " but /dev/kvm is missing: guests run under TCG emulation"
	case f.KVMDevice:
		d.VirtTypeReason = "/dev/kvm exists but the CPU shows no vmx/svm (a paravirtual/PVM device where guests hang): guests run under TCG emulation"
	default:
		d.VirtTypeReason = "no hardware virtualization (no vmx/svm, no /dev/kvm): guests run under TCG emulation"
	}

	if f.OVSKernelModule {
		d.OVSDatapath = DatapathSystem
		d.OVSDatapathReason = "openvswitch kernel module " + orUnknown(f.OVSModuleState)
	} else {
		d.OVSDatapath = DatapathNetdev
		d.OVSDatapathReason = "no openvswitch kernel module: OVS uses its userspace datapath"
	}

	if f.DeviceMapper {
		d.StorageBackend = StorageLVM
		d.StorageBackendReason = "device-mapper " + orUnknown(f.DeviceMapperState) + ": Cinder LVM on a loop-file-backed volume group cinder-volumes"
	} else {
		d.StorageBackend = StorageNone
		d.StorageBackendReason = "no device-mapper in the kernel: LVM logical volumes cannot be created, so Cinder gets no volume backend"
	}
	return d
}

func hwName(f Facts) string {
	if f.CPUVMX {
		return "vmx"
	}
	return "svm"
}

func orUnknown(s string) string {
	if s == "" {
		return "present"
	}
	return s
}
