package preflight

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/osdcloud/osd/hypervisor"
)

// Check names, in the order Evaluate reports them.
const (
	CheckRoot           = "root"
	CheckCPUs           = "cpus"
	CheckMemory         = "memory"
	CheckDisk           = "disk"
	CheckPorts          = "ports"
	CheckHostname       = "hostname"
	CheckConflicts      = "conflicts"
	CheckCgroup         = "cgroup"
	CheckKernel         = "kernel"
	CheckSystemd        = "systemd"
	CheckPackages       = "packages"
	CheckOptional       = "optional_packages"
	CheckVirtType       = "virt_type"
	CheckKVMPermissions = "kvm_permissions"
	CheckOVSDatapath    = "ovs_datapath"
	CheckStorage        = "storage_backend"
	CheckQEMURBD        = "qemu_rbd"
)

// Evaluate judges facts against requirements. It is pure and returns the
// findings in a fixed order (the Check* constants), the host decisions among
// them.
func Evaluate(f Facts, r Requirements) []Finding {
	d := Decide(f)
	var out []Finding
	add := func(fs ...Finding) { out = append(out, fs...) }
	if r.RequireRoot {
		add(checkRoot(f))
	}
	add(checkCPUs(f, r), checkMemory(f, r), checkDisk(f, r))
	if len(r.Ports) > 0 {
		add(checkPorts(f, r))
	}
	add(checkHostname(f), checkConflicts(f), checkCgroup(f),
		Finding{Check: CheckKernel, Status: OK, Message: "kernel " + orUnknown(f.Kernel)},
		checkSystemd(f))
	if len(r.Packages) > 0 {
		add(checkPackages(f, r.Packages, CheckPackages, Fail))
	}
	if len(r.OptionalPackages) > 0 {
		add(checkPackages(f, r.OptionalPackages, CheckOptional, Warn))
	}
	add(checkVirtType(f, d))
	if f.KVMDevice {
		add(checkKVMPermissions(f))
	}
	add(checkOVS(d), checkStorage(d))
	if d.StorageBackend == StorageCeph && r.QEMURBDPackage != "" {
		add(checkQEMURBD(f, r.QEMURBDPackage))
	}
	return out
}

func checkRoot(f Facts) Finding {
	if f.IsRoot {
		return Finding{Check: CheckRoot, Status: OK, Message: "running as root"}
	}
	return Finding{Check: CheckRoot, Status: Fail, Message: "osd prepares the host and needs root",
		Fix: "run it as root: sudo osd init"}
}

func checkCPUs(f Facts, r Requirements) Finding {
	fd := Finding{Check: CheckCPUs, Status: OK, Message: fmt.Sprintf("%d CPUs", f.CPUs)}
	switch {
	case f.CPUs < r.MinCPUs:
		fd.Status = Fail
		fd.Message = fmt.Sprintf("%d CPUs, at least %d needed", f.CPUs, r.MinCPUs)
		fd.Fix = fmt.Sprintf("give this host at least %d CPUs (%d recommended)", r.MinCPUs, r.RecommendedCPUs)
	case f.CPUs < r.RecommendedCPUs:
		fd.Status = Warn
		fd.Message = fmt.Sprintf("%d CPUs, %d recommended: services and guests will be slow", f.CPUs, r.RecommendedCPUs)
		fd.Fix = fmt.Sprintf("give this host %d or more CPUs", r.RecommendedCPUs)
	}
	return fd
}

func checkMemory(f Facts, r Requirements) Finding {
	fd := Finding{Check: CheckMemory, Status: OK, Message: gibString(f.MemoryBytes) + " of memory"}
	switch {
	case f.MemoryBytes < r.MinMemoryBytes:
		fd.Status = Fail
		fd.Message = fmt.Sprintf("%s of memory, at least %s needed", gibString(f.MemoryBytes), gibString(r.MinMemoryBytes))
		fd.Fix = fmt.Sprintf("give this host at least %s of memory (%s recommended)", gibString(r.MinMemoryBytes), gibString(r.RecommendedMemoryBytes))
	case f.MemoryBytes < r.RecommendedMemoryBytes:
		fd.Status = Warn
		fd.Message = fmt.Sprintf("%s of memory, %s recommended: little room for guests", gibString(f.MemoryBytes), gibString(r.RecommendedMemoryBytes))
		fd.Fix = fmt.Sprintf("give this host %s or more of memory", gibString(r.RecommendedMemoryBytes))
	}
	return fd
}

func checkDisk(f Facts, r Requirements) Finding {
	where := orUnknown(f.DiskPath)
	fd := Finding{Check: CheckDisk, Status: OK, Message: fmt.Sprintf("%s free under %s", gibString(f.DiskFreeBytes), where)}
	switch {
	case f.DiskFreeBytes < r.MinDiskBytes:
		fd.Status = Fail
		fd.Message = fmt.Sprintf("%s free under %s, at least %s needed", gibString(f.DiskFreeBytes), where, gibString(r.MinDiskBytes))
		fd.Fix = fmt.Sprintf("free or add space on the filesystem of %s (or set another state dir) to reach %s", where, gibString(r.MinDiskBytes))
	case f.DiskFreeBytes < r.RecommendedDiskBytes:
		fd.Status = Warn
		fd.Message = fmt.Sprintf("%s free under %s, %s recommended for images and volumes", gibString(f.DiskFreeBytes), where, gibString(r.RecommendedDiskBytes))
		fd.Fix = fmt.Sprintf("free or add space on the filesystem of %s to reach %s", where, gibString(r.RecommendedDiskBytes))
	}
	return fd
}

func checkPorts(f Facts, r Requirements) Finding {
	ports := slices.Clone(r.Ports)
	slices.Sort(ports)
	var busy, self []string
	for _, p := range ports {
		holder, probed := f.Ports[p]
		switch {
		case !probed:
			busy = append(busy, fmt.Sprintf("%d (not probed)", p))
		case holder == "":
		case f.SelfPorts[p]:
			self = append(self, strconv.Itoa(p))
		default:
			busy = append(busy, fmt.Sprintf("%d by %s", p, holder))
		}
	}
	if len(busy) > 0 {
		return Finding{Check: CheckPorts, Status: Fail,
			Message: "ports in use: " + strings.Join(busy, ", "),
			Fix:     "stop the process(es) holding " + strings.Join(busy, ", ")}
	}
	msg := fmt.Sprintf("%d ports free", len(ports))
	if len(self) > 0 {
		msg += " or held by osd itself (" + strings.Join(self, ", ") + ")"
	}
	return Finding{Check: CheckPorts, Status: OK, Message: msg}
}

func checkHostname(f Facts) Finding {
	switch {
	case f.Hostname == "":
		return Finding{Check: CheckHostname, Status: Fail, Message: "the host has no hostname",
			Fix: "hostnamectl set-hostname NAME (and add NAME to /etc/hosts)"}
	case !f.HostnameResolves:
		return Finding{Check: CheckHostname, Status: Fail,
			Message: fmt.Sprintf("hostname %q does not resolve (OpenStack services and cinder's packages need it)", f.Hostname),
			Fix:     fmt.Sprintf("echo '127.0.1.1 %s' >> /etc/hosts", f.Hostname)}
	}
	return Finding{Check: CheckHostname, Status: OK,
		Message: fmt.Sprintf("hostname %s resolves to %s", f.Hostname, strings.Join(f.HostnameAddresses, ", "))}
}

// runtimes that can coexist with osd's own k3s but fight over iptables and
// cgroups; any other conflict (kubelet, k3s, rke2, k0s) fails.
var softConflicts = []string{"containerd", "dockerd"}

func checkConflicts(f Facts) Finding {
	if len(f.RunningConflicts) == 0 {
		return Finding{Check: CheckConflicts, Status: OK, Message: "no other Kubernetes or container runtime running"}
	}
	status := Warn
	for _, c := range f.RunningConflicts {
		name, _, _ := strings.Cut(c, " ")
		if !slices.Contains(softConflicts, name) {
			status = Fail
		}
	}
	list := strings.Join(f.RunningConflicts, ", ")
	fd := Finding{Check: CheckConflicts, Status: status, Fix: "stop and disable them (systemctl disable --now <unit>): " + list}
	if status == Fail {
		fd.Message = "another Kubernetes is running (it would clash with osd's embedded k3s): " + list
	} else {
		fd.Message = "another container runtime is running (it may rewrite iptables and compete for resources): " + list
	}
	return fd
}

func checkCgroup(f Facts) Finding {
	switch f.CgroupVersion {
	case "v2":
		return Finding{Check: CheckCgroup, Status: OK, Message: "cgroup v2"}
	case "v1", "hybrid":
		return Finding{Check: CheckCgroup, Status: Warn,
			Message: "cgroup " + f.CgroupVersion + ": works with the embedded Kubernetes 1.34, which deprecates cgroup v1",
			Fix:     "boot with systemd.unified_cgroup_hierarchy=1 on the kernel command line for cgroup v2"}
	}
	return Finding{Check: CheckCgroup, Status: Warn, Message: "cgroup version unknown (no cgroup filesystem at /sys/fs/cgroup)",
		Fix: "mount the cgroup2 filesystem at /sys/fs/cgroup"}
}

func checkSystemd(f Facts) Finding {
	if f.Systemd {
		return Finding{Check: CheckSystemd, Status: OK, Message: "systemd is the init system"}
	}
	return Finding{Check: CheckSystemd, Status: OK, Message: "no systemd: osd starts virtlogd, libvirtd and Open vSwitch itself"}
}

func checkPackages(f Facts, want []string, check string, status Status) Finding {
	var missing []string
	for _, p := range want {
		if !f.Packages[p] {
			missing = append(missing, p)
		}
	}
	sort.Strings(missing)
	if len(missing) == 0 {
		return Finding{Check: check, Status: OK, Message: fmt.Sprintf("all %d packages installed", len(want))}
	}
	return Finding{Check: check, Status: status,
		Message: "missing Debian packages: " + strings.Join(missing, ", "),
		Fix:     "apt-get install -y " + strings.Join(missing, " ")}
}

func checkVirtType(f Facts, d Decisions) Finding {
	fd := Finding{Check: CheckVirtType, Status: OK, Message: "virt_type " + d.VirtType + ": " + d.VirtTypeReason}
	if d.VirtType == hypervisor.VirtTypeKVM {
		return fd
	}
	fd.Status = Warn
	switch {
	case f.CPUVMX:
		fd.Fix = "modprobe kvm_intel so that /dev/kvm appears"
	case f.CPUSVM:
		fd.Fix = "modprobe kvm_amd so that /dev/kvm appears"
	default:
		fd.Fix = "enable VT-x/AMD-V in the firmware, or nested virtualization (vmx/svm) in the outer hypervisor"
	}
	return fd
}

func checkKVMPermissions(f Facts) Finding {
	if f.KVMDeviceGroup == hypervisor.KVMGroup && f.KVMDeviceMode == uint32(hypervisor.KVMMode) {
		return Finding{Check: CheckKVMPermissions, Status: OK, Message: "/dev/kvm is group kvm, mode 0660"}
	}
	return Finding{Check: CheckKVMPermissions, Status: Warn,
		Message: fmt.Sprintf("/dev/kvm is group %s, mode %#o: libvirt re-probes QEMU for ~50 s on every call (osd init fixes it)", orUnknown(f.KVMDeviceGroup), f.KVMDeviceMode),
		Fix:     "chgrp kvm /dev/kvm && chmod 0660 /dev/kvm"}
}

func checkOVS(d Decisions) Finding {
	fd := Finding{Check: CheckOVSDatapath, Status: OK, Message: "datapath " + d.OVSDatapath + ": " + d.OVSDatapathReason}
	if d.OVSDatapath != DatapathSystem {
		fd.Status = Warn
		fd.Message += " (slower, fine for a test cloud)"
		fd.Fix = "boot a kernel with CONFIG_OPENVSWITCH (e.g. Debian's linux-image-amd64) for the kernel datapath"
	}
	return fd
}

func checkStorage(d Decisions) Finding {
	return Finding{Check: CheckStorage, Status: OK, Message: "storage backend " + d.StorageBackend + ": " + d.StorageBackendReason}
}

// checkQEMURBD: with Ceph, the host's QEMU (which runs the guests) opens volumes through
// its RBD block driver, a module in qemu-block-extra; without it every attach fails.
func checkQEMURBD(f Facts, pkg string) Finding {
	if f.Packages[pkg] {
		return Finding{Check: CheckQEMURBD, Status: OK, Message: "QEMU's RBD driver (" + pkg + ") is installed: guests reach Ceph volumes in userspace"}
	}
	return Finding{Check: CheckQEMURBD, Status: Fail,
		Message: "QEMU's RBD driver is missing (package " + pkg + "): guests could not attach Ceph volumes",
		Fix:     "apt-get install -y " + pkg}
}

// gibString formats bytes as GiB with one decimal.
func gibString(b int64) string {
	return strconv.FormatFloat(float64(b)/float64(gib), 'f', 1, 64) + " GiB"
}
