package preflight

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestProbeThisHost probes the real machine. Expectations come from
// independent sources (cpuinfo text, modprobe -n), not from fixed values.
func TestProbeThisHost(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	f, err := Probe(ctx, ProbeConfig{StateDir: filepath.Join(t.TempDir(), "not-yet", "state")})
	if err != nil {
		t.Fatalf("Probe: %v", err)
	}
	t.Logf("Probe took %s; facts %+v", time.Since(start), f)
	if f.CPUs <= 0 || f.MemoryBytes <= 0 || f.DiskFreeBytes <= 0 || f.Kernel == "" || f.Hostname == "" {
		t.Errorf("Probe = %+v, want positive CPUs, memory, disk and a kernel and hostname", f)
	}
	if !strings.HasPrefix(f.DiskPath, os.TempDir()) {
		t.Errorf("Probe DiskPath = %q, want the nearest existing parent of the state dir under %s", f.DiskPath, os.TempDir())
	}
	if len(f.Ports) != len(DefaultPorts()) {
		t.Errorf("Probe Ports = %v, want every default port probed", f.Ports)
	}
	if f.IsRoot != (os.Geteuid() == 0) {
		t.Errorf("Probe IsRoot = %v, want %v", f.IsRoot, os.Geteuid() == 0)
	}
	if !f.Packages["iptables"] && fileExists("/usr/sbin/iptables-legacy") {
		t.Errorf("Probe Packages[iptables] = false, but /usr/sbin/iptables-legacy is installed")
	}

	cpuinfo, _ := os.ReadFile("/proc/cpuinfo")
	hw := strings.Contains(string(cpuinfo), " vmx") || strings.Contains(string(cpuinfo), " svm")
	d := Decide(f)
	if !hw && d.VirtType != "qemu" {
		t.Errorf("Decide(this host).VirtType = %s, want qemu (no vmx/svm in /proc/cpuinfo)", d.VirtType)
	}
	if hw != (f.CPUVMX || f.CPUSVM) {
		t.Errorf("Probe CPUVMX/SVM = %v/%v, want hardware virt %v", f.CPUVMX, f.CPUSVM, hw)
	}
	if wantOVS := moduleAvailable("openvswitch"); f.OVSKernelModule != wantOVS {
		t.Errorf("Probe OVSKernelModule = %v (%s), want %v (modprobe -n)", f.OVSKernelModule, f.OVSModuleState, wantOVS)
	}
	if wantDM := moduleAvailable("dm_mod"); f.DeviceMapper != wantDM {
		t.Errorf("Probe DeviceMapper = %v (%s), want %v (modprobe -n)", f.DeviceMapper, f.DeviceMapperState, wantDM)
	}
	findings := Evaluate(f, DefaultRequirements())
	for _, fd := range findings {
		t.Logf("%-18s %-4s %s | %s", fd.Check, fd.Status, fd.Message, fd.Fix)
	}
	storage := findingOf(findings, CheckStorage)
	if !f.DeviceMapper && (d.StorageBackend != StorageCeph || !strings.Contains(storage.Message, "storage backend ceph: no device-mapper")) {
		t.Errorf("storage finding without device-mapper = %+v, want Ceph and the reason", storage)
	}
	if rbd := findingOf(findings, CheckQEMURBD); d.StorageBackend == StorageCeph && rbd.Check == "" {
		t.Errorf("Evaluate(this host, ceph) has no qemu_rbd finding")
	}
	if !f.OVSKernelModule && d.OVSDatapath != "netdev" {
		t.Errorf("Decide(this host).OVSDatapath = %s, want netdev", d.OVSDatapath)
	}
}

// moduleAvailable asks the kernel and modprobe, independently of Probe.
func moduleAvailable(name string) bool {
	if fileExists("/sys/module/" + name) {
		return true
	}
	if name == "dm_mod" {
		if b, _ := os.ReadFile("/proc/misc"); strings.Contains(string(b), " device-mapper\n") {
			return true
		}
	}
	if _, err := exec.LookPath("modprobe"); err != nil {
		return false
	}
	return exec.Command("modprobe", "-n", "-q", name).Run() == nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func findingOf(fs []Finding, check string) Finding {
	for _, f := range fs {
		if f.Check == check {
			return f
		}
	}
	return Finding{}
}

// TestProbePortHolders listens on real loopback ports and checks that Probe
// names this process as the holder, as osd itself or as a stranger
// depending on SelfPIDs.
func TestProbePortHolders(t *testing.T) {
	ln4, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln4.Close()
	ln6, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	defer ln6.Close()
	p4, p6 := ln4.Addr().(*net.TCPAddr).Port, ln6.Addr().(*net.TCPAddr).Port
	free := freePort(t)
	cfg := ProbeConfig{Ports: []int{p4, p6, free}, Packages: []string{}}

	f, err := Probe(context.Background(), cfg) // SelfPIDs default: this process
	if err != nil {
		t.Fatalf("Probe: %v", err)
	}
	for _, p := range []int{p4, p6} {
		if !f.SelfPorts[p] || !strings.Contains(f.Ports[p], "(pid "+strconv.Itoa(os.Getpid())+")") {
			t.Errorf("Probe(self) port %d = %q self=%v, want held by this process as osd itself", p, f.Ports[p], f.SelfPorts[p])
		}
	}
	if f.Ports[free] != "" {
		t.Errorf("Probe port %d = %q, want free", free, f.Ports[free])
	}
	if fd := findingOf(Evaluate(f, Requirements{Ports: cfg.Ports}), CheckPorts); fd.Status != OK {
		t.Errorf("ports finding (held by self) = %+v, want ok", fd)
	}

	cfg.SelfPIDs, cfg.SelfExe = []int{-1}, "/nonexistent/osd"
	f, err = Probe(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if f.SelfPorts[p4] || !strings.Contains(f.Ports[p4], "(pid "+strconv.Itoa(os.Getpid())+")") {
		t.Errorf("Probe(stranger) port %d = %q self=%v, want held by pid %d, not self", p4, f.Ports[p4], f.SelfPorts[p4], os.Getpid())
	}
	if fd := findingOf(Evaluate(f, Requirements{Ports: cfg.Ports}), CheckPorts); fd.Status != Fail || !strings.Contains(fd.Fix, strconv.Itoa(p4)+" by ") {
		t.Errorf("ports finding (held by a stranger) = %+v, want fail naming port %d", fd, p4)
	}
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return p
}

// TestProbeConflicts runs a real process from a binary named kubelet (a copy
// of sleep) and checks Probe reports it, unless it is osd's own: the same
// executable as osd, or one under osd's state dir.
func TestProbeConflicts(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatalf("sleep is not installed: %v", err)
	}
	dir := t.TempDir()
	kubelet := filepath.Join(dir, "kubelet")
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kubelet, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(kubelet, "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := strconv.Itoa(cmd.Process.Pid)
	time.Sleep(50 * time.Millisecond) // let exec replace the forked image

	probe := func(cfg ProbeConfig) []string {
		t.Helper()
		cfg.Ports, cfg.Packages = []int{}, []string{}
		f, err := Probe(context.Background(), cfg)
		if err != nil {
			t.Fatalf("Probe: %v", err)
		}
		var ours []string
		for _, c := range f.RunningConflicts {
			if strings.Contains(c, "(pid "+pid+",") {
				ours = append(ours, c)
			}
		}
		return ours
	}
	if got := probe(ProbeConfig{}); len(got) != 1 || got[0] != "kubelet (pid "+pid+", "+kubelet+")" {
		t.Errorf("Probe().RunningConflicts for the fake kubelet = %q, want [kubelet (pid %s, %s)]", got, pid, kubelet)
	}
	if got := probe(ProbeConfig{StateDir: dir}); len(got) != 0 {
		t.Errorf("Probe(StateDir holding the binary).RunningConflicts = %q, want none", got)
	}
	if got := probe(ProbeConfig{SelfExe: kubelet}); len(got) != 0 {
		t.Errorf("Probe(SelfExe = the binary).RunningConflicts = %q, want none", got)
	}
	if got := probe(ProbeConfig{SelfPIDs: []int{cmd.Process.Pid}}); len(got) != 0 {
		t.Errorf("Probe(SelfPIDs has it).RunningConflicts = %q, want none", got)
	}
}

func TestConflictName(t *testing.T) {
	tests := map[string]string{
		"kubelet": "kubelet", "k3s": "k3s", "k3s-server": "k3s", "k3s-agent": "k3s", "rke2": "rke2",
		"rke2-server": "rke2", "containerd": "containerd", "containerd-shim-runc-v2": "", "dockerd": "dockerd",
		"kube-apiserver": "kube-apiserver", "k0s": "k0s", "bash": "", "osd": "",
	}
	for in, want := range tests {
		if got := conflictName(in); got != want {
			t.Errorf("conflictName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDpkgInstalled(t *testing.T) {
	status := `Package: lvm2
Status: install ok installed
Architecture: amd64
Description: Linux Logical Volume Manager
 This is LVM2. Package: fake continuation line

Package: openvswitch-switch
Status: deinstall ok config-files
Architecture: amd64

Package: libc6
Status: hold ok installed
Architecture: amd64

Package: runc
Status: install ok half-configured
`
	path := filepath.Join(t.TempDir(), "status")
	if err := os.WriteFile(path, []byte(status), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := dpkgInstalled(path, []string{"lvm2", "openvswitch-switch", "libc6:amd64", "runc", "mmdebstrap"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"lvm2": true, "openvswitch-switch": false, "libc6:amd64": true, "runc": false, "mmdebstrap": false}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("dpkgInstalled(...)[%s] = %v, want %v", k, got[k], v)
		}
	}
	if _, err := dpkgInstalled(filepath.Join(t.TempDir(), "absent"), []string{"x"}); err == nil {
		t.Error("dpkgInstalled(missing file) = nil error, want an error")
	}
}

// TestModuleState reads a fake module tree: the real kernel lacks the
// modules (openvswitch, dm_mod) whose other states need testing.
func TestModuleState(t *testing.T) {
	root := t.TempDir()
	sys, proc, mods := filepath.Join(root, "sys"), filepath.Join(root, "proc"), filepath.Join(root, "modules")
	for _, d := range []string{filepath.Join(sys, "module", "openvswitch"), proc, mods} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(proc, "misc"), "236 device-mapper\n 1 psaux\n")
	write(filepath.Join(mods, "modules.dep"), "kernel/net/openvswitch/openvswitch.ko.xz: kernel/lib/libcrc32c.ko\nkernel/drivers/md/dm-mod.ko.zst:\n")
	write(filepath.Join(mods, "modules.builtin"), "kernel/drivers/block/loop.ko\n")
	cfg := ProbeConfig{SysRoot: sys, ProcRoot: proc}
	m := readModules(mods)
	tests := []struct {
		sysName, ko, misc string
		want              string
	}{
		{"openvswitch", "openvswitch.ko", "", "loaded"},
		{"dm_mod", "dm-mod.ko", "device-mapper", "loaded"}, // via /proc/misc
		{"dm_mod", "dm-mod.ko", "", "loadable"},
		{"loop", "loop.ko", "", "builtin"},
		{"nbd", "nbd.ko", "", "absent"},
	}
	for _, tt := range tests {
		if got := moduleState(cfg, m, tt.sysName, tt.ko, tt.misc); got != tt.want {
			t.Errorf("moduleState(%s, %s, %q) = %s, want %s", tt.sysName, tt.ko, tt.misc, got, tt.want)
		}
	}
}

// BenchmarkPreflight measures a full preflight: Probe of this host plus Evaluate.
func BenchmarkPreflight(b *testing.B) {
	ctx := context.Background()
	cfg := ProbeConfig{StateDir: b.TempDir()}
	r := DefaultRequirements()
	for b.Loop() {
		f, err := Probe(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		_ = Evaluate(f, r)
	}
}

// BenchmarkEvaluate measures the pure part alone.
func BenchmarkEvaluate(b *testing.B) {
	f, r := goodFacts(), DefaultRequirements()
	for b.Loop() {
		_ = Evaluate(f, r)
	}
}

// TestProbeUnreadableHost points Probe at an empty /proc: it must say what it
// could not read, and Evaluate must not mistake the unknowns for good news.
func TestProbeUnreadableHost(t *testing.T) {
	empty := t.TempDir()
	f, err := Probe(context.Background(), ProbeConfig{ProcRoot: empty, SysRoot: empty, DevRoot: empty,
		DpkgStatus: filepath.Join(empty, "status"), Ports: []int{6443}, Packages: []string{"lvm2"}})
	if err == nil {
		t.Fatalf("Probe(empty /proc) = %+v, nil error, want an error", f)
	}
	t.Logf("Probe(empty /proc) error: %v", err)
	fs := Evaluate(f, Requirements{MinMemoryBytes: 1, Ports: []int{6443}, Packages: []string{"lvm2"}})
	for _, check := range []string{CheckMemory, CheckPorts, CheckPackages} {
		if fd := findingOf(fs, check); fd.Status != Fail {
			t.Errorf("Evaluate(unreadable host)[%s] = %+v, want fail", check, fd)
		}
	}
}
