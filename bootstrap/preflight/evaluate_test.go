package preflight

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// goodFacts is a host that passes everything: every case below changes
// only what it is about.
func goodFacts() Facts {
	ports := map[int]string{}
	for _, p := range DefaultPorts() {
		ports[p] = ""
	}
	pkgs := map[string]bool{}
	for _, p := range append(DefaultPackages(), DefaultOptionalPackages()...) {
		pkgs[p] = true
	}
	return Facts{
		CPUs: 8, MemoryBytes: 32 * gib, DiskPath: "/var/lib/osd", DiskFreeBytes: 200 * gib,
		Ports: ports, Hostname: "node1", HostnameResolves: true, HostnameAddresses: []string{"10.0.0.5"},
		CPUVMX: true, KVMDevice: true, KVMDeviceMode: 0o660, KVMDeviceGroup: "kvm",
		OVSKernelModule: true, OVSModuleState: "loaded", DeviceMapper: true, DeviceMapperState: "loaded",
		ISCSITarget: true, ISCSITargetState: "loadable", ISCSIInitiator: true, ISCSIInitiatorState: "loadable",
		Packages: pkgs, CgroupVersion: "v2", Kernel: "6.1.0-28-amd64", IsRoot: true, Systemd: true,
	}
}

// want is the expected verdict of one check; fix and msg are substrings the
// fix and message must contain.
type want struct {
	check  string
	status Status
	fix    string
	msg    string
}

func TestEvaluate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Facts)
		want   []want
		absent []string // checks that must not be reported
	}{
		{"good host", func(*Facts) {}, []want{
			{CheckRoot, OK, "", ""}, {CheckCPUs, OK, "", "8 CPUs"}, {CheckMemory, OK, "", "32.0 GiB"},
			{CheckDisk, OK, "", "200.0 GiB free under /var/lib/osd"}, {CheckPorts, OK, "", "9 ports free"},
			{CheckVirtType, OK, "", "virt_type kvm"}, {CheckKVMPermissions, OK, "", ""},
			{CheckOVSDatapath, OK, "", "datapath system"}, {CheckStorage, OK, "", "storage backend lvm"},
		}, nil},
		{"1 CPU", func(f *Facts) { f.CPUs = 1 }, []want{{CheckCPUs, Fail, "at least 2 CPUs", "1 CPUs, at least 2"}}, nil},
		{"2 CPUs", func(f *Facts) { f.CPUs = 2 }, []want{{CheckCPUs, Warn, "4 or more CPUs", ""}}, nil},
		{"3 CPUs", func(f *Facts) { f.CPUs = 3 }, []want{{CheckCPUs, Warn, "", "4 recommended"}}, nil},
		{"4 CPUs", func(f *Facts) { f.CPUs = 4 }, []want{{CheckCPUs, OK, "", ""}}, nil},
		{"4 GiB memory", func(f *Facts) { f.MemoryBytes = 4 * gib }, []want{{CheckMemory, Fail, "at least 8.0 GiB", "4.0 GiB of memory"}}, nil},
		{"8 GiB memory exactly", func(f *Facts) { f.MemoryBytes = 8 * gib }, []want{{CheckMemory, Warn, "16.0 GiB or more", ""}}, nil},
		{"just under 8 GiB", func(f *Facts) { f.MemoryBytes = 8*gib - 1 }, []want{{CheckMemory, Fail, "", ""}}, nil},
		{"24 GiB memory (build machines)", func(f *Facts) { f.MemoryBytes = 24 * gib }, []want{{CheckMemory, OK, "", ""}}, nil},
		{"disk full", func(f *Facts) { f.DiskFreeBytes = 2 * gib }, []want{{CheckDisk, Fail, "filesystem of /var/lib/osd", "2.0 GiB free"}}, nil},
		{"disk tight", func(f *Facts) { f.DiskFreeBytes = 45 * gib }, []want{{CheckDisk, Warn, "60.0 GiB", ""}}, nil},
		{"port held by foreign k3s", func(f *Facts) { f.Ports[6443] = "k3s-server (pid 812)" },
			[]want{{CheckPorts, Fail, "6443 by k3s-server (pid 812)", "ports in use"}}, nil},
		{"two ports held", func(f *Facts) { f.Ports[10250] = "kubelet (pid 9)"; f.Ports[6443] = "nginx (pid 3)" },
			[]want{{CheckPorts, Fail, "6443 by nginx (pid 3), 10250 by kubelet (pid 9)", ""}}, nil},
		{"port held by osd itself", func(f *Facts) { f.Ports[8443] = "osd (pid 77)"; f.SelfPorts = map[int]bool{8443: true} },
			[]want{{CheckPorts, OK, "", "held by osd itself (8443)"}}, nil},
		{"port not probed", func(f *Facts) { delete(f.Ports, 10259) }, []want{{CheckPorts, Fail, "10259 (not probed)", ""}}, nil},
		{"hostname does not resolve", func(f *Facts) { f.HostnameResolves = false; f.HostnameAddresses = nil },
			[]want{{CheckHostname, Fail, "echo '127.0.1.1 node1' >> /etc/hosts", "does not resolve"}}, nil},
		{"no hostname", func(f *Facts) { f.Hostname = ""; f.HostnameResolves = false },
			[]want{{CheckHostname, Fail, "hostnamectl set-hostname", ""}}, nil},
		{"foreign k3s running", func(f *Facts) { f.RunningConflicts = []string{"k3s (pid 812, /usr/local/bin/k3s)"} },
			[]want{{CheckConflicts, Fail, "k3s (pid 812, /usr/local/bin/k3s)", "another Kubernetes"}}, nil},
		{"foreign kubelet and containerd", func(f *Facts) {
			f.RunningConflicts = []string{"containerd (pid 5, /usr/bin/containerd)", "kubelet (pid 6, /usr/bin/kubelet)"}
		}, []want{{CheckConflicts, Fail, "systemctl disable --now", "kubelet (pid 6"}}, nil},
		{"only Debian's containerd running", func(f *Facts) { f.RunningConflicts = []string{"containerd (pid 5, /usr/bin/containerd)"} },
			[]want{{CheckConflicts, Warn, "containerd (pid 5", "container runtime"}}, nil},
		{"dockerd running", func(f *Facts) { f.RunningConflicts = []string{"dockerd (pid 7, /usr/bin/dockerd)"} },
			[]want{{CheckConflicts, Warn, "", "dockerd"}}, nil},
		{"PVM: /dev/kvm without vmx", func(f *Facts) { f.CPUVMX = false },
			[]want{{CheckVirtType, Warn, "nested virtualization", "virt_type qemu: /dev/kvm exists but the CPU shows no vmx/svm"}}, nil},
		{"AMD with svm", func(f *Facts) { f.CPUVMX, f.CPUSVM = false, true }, []want{{CheckVirtType, OK, "", "CPU has svm"}}, nil},
		{"vmx but no /dev/kvm", func(f *Facts) { f.KVMDevice, f.KVMDeviceMode, f.KVMDeviceGroup = false, 0, "" },
			[]want{{CheckVirtType, Warn, "modprobe kvm_intel", "virt_type qemu"}}, []string{CheckKVMPermissions}},
		{"svm but no /dev/kvm", func(f *Facts) { f.CPUVMX, f.CPUSVM, f.KVMDevice = false, true, false },
			[]want{{CheckVirtType, Warn, "modprobe kvm_amd", ""}}, []string{CheckKVMPermissions}},
		{"no virtualization at all", func(f *Facts) { f.CPUVMX, f.KVMDevice = false, false },
			[]want{{CheckVirtType, Warn, "VT-x/AMD-V", "no hardware virtualization"}}, []string{CheckKVMPermissions}},
		{"/dev/kvm root 0600", func(f *Facts) { f.KVMDeviceMode, f.KVMDeviceGroup = 0o600, "root" },
			[]want{{CheckKVMPermissions, Warn, "chgrp kvm /dev/kvm && chmod 0660 /dev/kvm", "group root, mode 0600"}}, nil},
		{"/dev/kvm 0666", func(f *Facts) { f.KVMDeviceMode = 0o666 }, []want{{CheckKVMPermissions, Warn, "chmod 0660", ""}}, nil},
		{"no OVS module", func(f *Facts) { f.OVSKernelModule, f.OVSModuleState = false, "absent" },
			[]want{{CheckOVSDatapath, Warn, "CONFIG_OPENVSWITCH", "datapath netdev"}}, nil},
		{"OVS module loadable", func(f *Facts) { f.OVSModuleState = "loadable" }, []want{{CheckOVSDatapath, OK, "", "module loadable"}}, nil},
		{"no device-mapper", func(f *Facts) { f.DeviceMapper, f.DeviceMapperState = false, "absent" },
			[]want{{CheckStorage, OK, "", "storage backend ceph: no device-mapper"}, {CheckQEMURBD, OK, "", "qemu-block-extra"}}, nil},
		{"no device-mapper, no QEMU RBD driver", func(f *Facts) { f.DeviceMapper = false; f.Packages["qemu-block-extra"] = false },
			[]want{{CheckStorage, OK, "", "storage backend ceph"}, {CheckQEMURBD, Fail, "apt-get install -y qemu-block-extra", "RBD driver is missing"}}, nil},
		{"no device-mapper, QEMU's RBD driver", func(f *Facts) { f.DeviceMapper = false; f.Packages["qemu-block-extra"] = true },
			[]want{{CheckStorage, OK, "", "storage backend ceph"}, {CheckQEMURBD, OK, "", "qemu-block-extra"}}, nil},
		{"lvm needs no RBD driver", func(*Facts) {}, []want{{CheckStorage, OK, "", "storage backend lvm"}}, []string{CheckQEMURBD}},
		{"device-mapper loadable", func(f *Facts) { f.DeviceMapperState = "loadable" }, []want{{CheckStorage, OK, "", "device-mapper loadable"}}, nil},
		{"missing packages", func(f *Facts) { f.Packages["openvswitch-switch"] = false; delete(f.Packages, "lvm2") },
			[]want{{CheckPackages, Fail, "apt-get install -y lvm2 openvswitch-switch", "missing Debian packages: lvm2, openvswitch-switch"}}, nil},
		{"missing optional package", func(f *Facts) { f.Packages["mmdebstrap"] = false },
			[]want{{CheckPackages, OK, "", ""}, {CheckOptional, Warn, "apt-get install -y mmdebstrap", ""}}, nil},
		{"not root", func(f *Facts) { f.IsRoot = false }, []want{{CheckRoot, Fail, "sudo osd init", ""}}, nil},
		{"cgroup hybrid", func(f *Facts) { f.CgroupVersion = "hybrid" }, []want{{CheckCgroup, Warn, "systemd.unified_cgroup_hierarchy=1", "cgroup hybrid"}}, nil},
		{"cgroup v1", func(f *Facts) { f.CgroupVersion = "v1" }, []want{{CheckCgroup, Warn, "", ""}}, nil},
		{"cgroup unknown", func(f *Facts) { f.CgroupVersion = "" }, []want{{CheckCgroup, Warn, "cgroup2", ""}}, nil},
		{"no systemd is fine", func(f *Facts) { f.Systemd = false }, []want{{CheckSystemd, OK, "", "osd starts virtlogd"}}, nil},
		{"build machine", func(f *Facts) {
			f.CPUs, f.MemoryBytes, f.CPUVMX, f.KVMDeviceMode, f.KVMDeviceGroup = 2, 24*gib, false, 0o600, "root"
			f.OVSKernelModule, f.OVSModuleState, f.DeviceMapper, f.DeviceMapperState = false, "absent", false, "absent"
			f.CgroupVersion, f.Systemd = "hybrid", false
		}, []want{
			{CheckCPUs, Warn, "", ""}, {CheckMemory, OK, "", ""}, {CheckVirtType, Warn, "", "virt_type qemu"},
			{CheckKVMPermissions, Warn, "", ""}, {CheckOVSDatapath, Warn, "", "netdev"}, {CheckStorage, OK, "", "storage backend ceph"},
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := goodFacts()
			tt.change(&f)
			got := Evaluate(f, DefaultRequirements())
			byCheck := map[string]Finding{}
			for _, fd := range got {
				if _, dup := byCheck[fd.Check]; dup {
					t.Errorf("Evaluate reported check %s twice", fd.Check)
				}
				byCheck[fd.Check] = fd
				if (fd.Status == OK) != (fd.Fix == "") || strings.Contains(fd.Fix, "\n") {
					t.Errorf("finding %+v: want a one-line Fix exactly when not ok", fd)
				}
			}
			for _, w := range tt.want {
				fd, ok := byCheck[w.check]
				if !ok {
					t.Errorf("Evaluate(...) has no %s finding, want %s", w.check, w.status)
					continue
				}
				if fd.Status != w.status || !strings.Contains(fd.Fix, w.fix) || !strings.Contains(fd.Message, w.msg) {
					t.Errorf("Evaluate(...)[%s] = %+v, want status %s, fix containing %q, message containing %q", w.check, fd, w.status, w.fix, w.msg)
				}
			}
			for _, c := range tt.absent {
				if fd, ok := byCheck[c]; ok {
					t.Errorf("Evaluate(...) reported %+v, want no %s finding", fd, c)
				}
			}
			wantFailed := false
			for _, w := range tt.want {
				wantFailed = wantFailed || w.status == Fail
			}
			if Failed(got) != wantFailed {
				t.Errorf("Failed(Evaluate(...)) = %v, want %v; findings %+v", Failed(got), wantFailed, got)
			}
			if again := Evaluate(f, DefaultRequirements()); !reflect.DeepEqual(got, again) {
				t.Errorf("Evaluate is not deterministic: %+v then %+v", got, again)
			}
		})
	}
}

func TestEvaluateOrder(t *testing.T) {
	want := []string{CheckRoot, CheckCPUs, CheckMemory, CheckDisk, CheckPorts, CheckHostname, CheckConflicts,
		CheckCgroup, CheckKernel, CheckSystemd, CheckPackages, CheckOptional, CheckVirtType, CheckKVMPermissions,
		CheckOVSDatapath, CheckStorage}
	var got []string
	for _, fd := range Evaluate(goodFacts(), DefaultRequirements()) {
		got = append(got, fd.Check)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Evaluate(good) checks = %v, want %v", got, want)
	}
}

func TestEvaluateCustomRequirements(t *testing.T) {
	r := Requirements{MinCPUs: 1, RecommendedCPUs: 1, Ports: []int{8443}}
	f := Facts{CPUs: 1, Ports: map[int]string{8443: ""}, Hostname: "h", HostnameResolves: true, CgroupVersion: "v2"}
	got := Evaluate(f, r)
	for _, fd := range got {
		switch fd.Check {
		case CheckRoot, CheckPackages, CheckOptional, CheckKVMPermissions:
			t.Errorf("Evaluate(minimal requirements) reported %+v, want no %s check", fd, fd.Check)
		}
	}
	if Failed(got) {
		t.Errorf("Failed(Evaluate(minimal)) = true, want false: %+v", got)
	}
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name                    string
		f                       Facts
		virt, datapath, storage string
	}{
		{"full hardware", Facts{CPUVMX: true, KVMDevice: true, OVSKernelModule: true, DeviceMapper: true, ISCSITarget: true, ISCSIInitiator: true}, "kvm", "system", "lvm"},
		{"PVM host", Facts{KVMDevice: true}, "qemu", "netdev", "ceph"},
		{"amd, no modules", Facts{CPUSVM: true, KVMDevice: true}, "kvm", "netdev", "ceph"},
		{"vmx without device", Facts{CPUVMX: true, DeviceMapper: true, ISCSITarget: true, ISCSIInitiator: true}, "qemu", "netdev", "lvm"},
		{"device-mapper without iSCSI", Facts{DeviceMapper: true}, "qemu", "netdev", "ceph"},
		{"nothing", Facts{}, "qemu", "netdev", "ceph"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.f)
			if d.VirtType != tt.virt || d.OVSDatapath != tt.datapath || d.StorageBackend != tt.storage {
				t.Errorf("Decide(%+v) = %s/%s/%s, want %s/%s/%s", tt.f, d.VirtType, d.OVSDatapath, d.StorageBackend, tt.virt, tt.datapath, tt.storage)
			}
			if d.VirtTypeReason == "" || d.OVSDatapathReason == "" || d.StorageBackendReason == "" {
				t.Errorf("Decide(%+v) = %+v, want every reason set", tt.f, d)
			}
		})
	}
}

func TestFindingJSON(t *testing.T) {
	b, err := json.Marshal(Finding{Check: CheckCPUs, Status: Warn, Message: "m", Fix: "f"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"check":"cpus","status":"warn","message":"m","fix":"f"}`; string(b) != want {
		t.Errorf("json.Marshal(Finding) = %s, want %s", b, want)
	}
}
