package hypervisor

import "strings"

// Virt types as nova's [libvirt] virt_type understands them.
const (
	VirtTypeKVM  = "kvm"
	VirtTypeQEMU = "qemu"
)

// ParseCPUFlags reports whether any "flags" line of /proc/cpuinfo text lists
// Intel VT-x (vmx) or AMD-V (svm).
func ParseCPUFlags(cpuinfo string) (vmx, svm bool) {
	for _, line := range strings.Split(cpuinfo, "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(key) != "flags" {
			continue
		}
		for _, flag := range strings.Fields(value) {
			switch flag {
			case "vmx":
				vmx = true
			case "svm":
				svm = true
			}
		}
	}
	return vmx, svm
}

// DecideVirtType returns "kvm" only when the CPU advertises hardware
// virtualization AND a usable /dev/kvm exists. A /dev/kvm without vmx/svm
// (a PVM or otherwise paravirtual device, as on the osd build machines) is not
// trusted: guests hang there, so the answer is "qemu" (TCG).
func DecideVirtType(hasHWVirt bool, kvmUsable bool) string {
	if hasHWVirt && kvmUsable {
		return VirtTypeKVM
	}
	return VirtTypeQEMU
}
