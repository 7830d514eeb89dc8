package hypervisor

import "testing"

func TestParseCPUFlags(t *testing.T) {
	tests := []struct {
		name, cpuinfo string
		vmx, svm      bool
	}{
		{"empty", "", false, false},
		{"intel with vmx", "processor\t: 0\nflags\t\t: fpu vme de pse vmx sse2\n", true, false},
		{"amd with svm", "processor\t: 0\nflags\t\t: fpu svm lm\n", false, true},
		{"no virt flags (PVM guest)", "flags\t\t: fpu vme hypervisor lm\nbugs\t\t: spectre_v1\n", false, false},
		{"vmx only inside another key", "vmx flags\t: vnmi preemption_timer\nflags\t: fpu\n", false, false},
		{"vmx as a substring is not vmx", "flags\t: vmxon svmx\n", false, false},
		{"second cpu has it", "flags\t: fpu\n\nflags\t: fpu vmx\n", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vmx, svm := ParseCPUFlags(tt.cpuinfo)
			if vmx != tt.vmx || svm != tt.svm {
				t.Errorf("ParseCPUFlags(%q) = %v, %v, want %v, %v", tt.cpuinfo, vmx, svm, tt.vmx, tt.svm)
			}
		})
	}
}

func TestDecideVirtType(t *testing.T) {
	tests := []struct {
		hw, kvm bool
		want    string
	}{
		{true, true, VirtTypeKVM},
		{true, false, VirtTypeQEMU},  // VT-x in the CPU but no usable /dev/kvm
		{false, true, VirtTypeQEMU},  // PVM: /dev/kvm without vmx/svm
		{false, false, VirtTypeQEMU}, // plain TCG
	}
	for _, tt := range tests {
		if got := DecideVirtType(tt.hw, tt.kvm); got != tt.want {
			t.Errorf("DecideVirtType(%v, %v) = %q, want %q", tt.hw, tt.kvm, got, tt.want)
		}
	}
}
