package preflight

import (
	"strings"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/hypervisor"
)

// Storage backends for Cinder.
const (
	StorageCeph = api.StorageCeph // a single-node Ceph osd runs: RBD, all in userspace
	StorageLVM  = api.StorageLVM  // loop-file-backed LVM volume group (cinder-volumes) over iSCSI
	StorageNone = api.StorageNone // no block storage service on this host (only when asked for)
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
	StorageBackend       string `json:"storage_backend"` // ceph | lvm
	StorageBackendReason string `json:"storage_backend_reason"`
}

// Decide derives the host decisions from facts. It is pure.
//
// virt_type is kvm only when the CPU shows vmx or svm AND /dev/kvm exists; a
// /dev/kvm without them (PVM, as on the osd build machines) hangs guests, so
// it means qemu (TCG). OVS uses the kernel datapath when the openvswitch
// module is there, else the userspace netdev datapath. Cinder uses a
// loop-backed LVM volume group only where the kernel can serve and attach its
// volumes: device-mapper (elsewhere vgcreate works but lvcreate fails), an iSCSI
// target (LIO) to export them and the iSCSI initiator to attach them. Everywhere
// else it uses a single-node Ceph, which needs none of them (QEMU, Cinder and
// Glance speak RBD in userspace).
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

	d.StorageBackend, d.StorageBackendReason = decideStorage(f)
	return d
}

func decideStorage(f Facts) (string, string) {
	var missing []string
	if !f.DeviceMapper {
		missing = append(missing, "no device-mapper (LVM cannot make logical volumes)")
	}
	if !f.ISCSITarget {
		missing = append(missing, "no iSCSI target (LIO) to export them")
	}
	if !f.ISCSIInitiator {
		missing = append(missing, "no iSCSI initiator (iscsi_tcp) to attach them")
	}
	if len(missing) == 0 {
		return StorageLVM, "device-mapper " + orUnknown(f.DeviceMapperState) + ", LIO " + orUnknown(f.ISCSITargetState) +
			", iscsi_tcp " + orUnknown(f.ISCSIInitiatorState) + ": Cinder LVM on a loop-file-backed volume group cinder-volumes, exported over iSCSI"
	}
	return StorageCeph, strings.Join(missing, ", ") + ": Cinder and Glance on a single-node Ceph (RBD in userspace: QEMU, Cinder and Glance need no kernel driver)"
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
