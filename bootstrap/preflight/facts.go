package preflight

// Facts is everything Probe reads from the host. Evaluate and Decide judge
// only these, so any combination can be tested without a host.
type Facts struct {
	CPUs          int    `json:"cpus"`
	MemoryBytes   int64  `json:"memory_bytes"`
	DiskPath      string `json:"disk_path"` // the existing directory whose filesystem was measured
	DiskFreeBytes int64  `json:"disk_free_bytes"`

	// Ports maps each probed TCP port to who listens on it: "" when free,
	// else e.g. "k3s (pid 812)". SelfPorts marks ports held by osd itself.
	Ports     map[int]string `json:"ports"`
	SelfPorts map[int]bool   `json:"self_ports,omitempty"`

	Hostname          string   `json:"hostname"`
	HostnameResolves  bool     `json:"hostname_resolves"`
	HostnameAddresses []string `json:"hostname_addresses,omitempty"`

	CPUVMX bool `json:"cpu_vmx"` // Intel VT-x in /proc/cpuinfo flags
	CPUSVM bool `json:"cpu_svm"` // AMD-V
	// KVMDevice: /dev/kvm exists (a PVM or paravirtual host has one too).
	KVMDevice      bool   `json:"kvm_device"`
	KVMDeviceMode  uint32 `json:"kvm_device_mode,omitempty"` // permission bits
	KVMDeviceGroup string `json:"kvm_device_group,omitempty"`

	// OVSKernelModule: openvswitch is loaded, built in or loadable.
	OVSKernelModule bool   `json:"ovs_kernel_module"`
	OVSModuleState  string `json:"ovs_module_state"` // loaded | builtin | loadable | absent
	// DeviceMapper: the kernel has device-mapper (loaded, built in, or a
	// dm_mod module to load). A /dev/mapper/control node alone does not
	// count: libdevmapper creates it even where the kernel has no driver.
	DeviceMapper      bool   `json:"device_mapper"`
	DeviceMapperState string `json:"device_mapper_state"` // loaded | loadable | absent
	// ISCSITarget: the kernel's iSCSI target (LIO: target_core_mod and iscsi_target_mod)
	// that Cinder's LVM driver exports volumes with; ISCSIInitiator: iscsi_tcp, with which
	// nova-compute attaches them. State as for DeviceMapper (the lesser of the two for LIO).
	ISCSITarget         bool   `json:"iscsi_target"`
	ISCSITargetState    string `json:"iscsi_target_state"`
	ISCSIInitiator      bool   `json:"iscsi_initiator"`
	ISCSIInitiatorState string `json:"iscsi_initiator_state"`

	// RunningConflicts are processes of another Kubernetes or container
	// runtime, e.g. "k3s (pid 812, /usr/local/bin/k3s)"; osd's own are excluded.
	RunningConflicts []string `json:"running_conflicts,omitempty"`

	// Packages maps each probed Debian package to whether dpkg has it installed.
	Packages map[string]bool `json:"packages"`

	CgroupVersion string `json:"cgroup_version"` // v1 | v2 | hybrid
	Kernel        string `json:"kernel"`
	IsRoot        bool   `json:"is_root"`
	Systemd       bool   `json:"systemd"` // booted with systemd as init
}
