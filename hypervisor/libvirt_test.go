package hypervisor

import (
	"bytes"
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"
)

func TestParseDomainTypes(t *testing.T) {
	caps := `<capabilities><host><cpu><arch>x86_64</arch></cpu></host>
<guest><os_type>hvm</os_type><arch name='i686'><domain type='qemu'/><domain type='kvm'/></arch></guest>
<guest><os_type>hvm</os_type><arch name='x86_64'><domain type='qemu'/></arch></guest></capabilities>`
	arch, types, err := ParseDomainTypes(caps)
	if err != nil || arch != "x86_64" || !slices.Equal(types, []string{"qemu"}) {
		t.Errorf("ParseDomainTypes(qemu only for x86_64) = %q, %v, %v, want x86_64, [qemu], nil", arch, types, err)
	}
	caps = strings.Replace(caps, "<arch name='x86_64'><domain type='qemu'/>", "<arch name='x86_64'><domain type='qemu'/><domain type='kvm'/>", 1)
	if _, types, err = ParseDomainTypes(caps); err != nil || !slices.Equal(types, []string{"kvm", "qemu"}) {
		t.Errorf("ParseDomainTypes(kvm offered) = %v, %v, want [kvm qemu], nil", types, err)
	}
	if _, _, err = ParseDomainTypes("<capabilities><host/></capabilities>"); err == nil {
		t.Error("ParseDomainTypes(no guests) = nil error, want an error")
	}
}

// libvirtTestEnv finds what the TCG guest test needs, or skips.
func libvirtTestEnv(t *testing.T) (kernel, busybox string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("libvirtd needs root")
	}
	for _, bin := range []string{"libvirtd", "virtlogd", "qemu-system-x86_64"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s missing (test/deps.sh installs libvirt-daemon-system qemu-system-x86): %v", bin, err)
		}
	}
	busybox = "/bin/busybox"
	if f, err := elf.Open(busybox); err != nil {
		t.Fatalf("no busybox (test/deps.sh installs busybox-static): %v", err)
	} else {
		dynamic := slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP })
		f.Close()
		if dynamic {
			t.Fatal("busybox is dynamically linked (test/deps.sh installs busybox-static)")
		}
	}
	kernels, _ := filepath.Glob("/boot/vmlinuz-*")
	if len(kernels) == 0 {
		t.Fatal("no kernel in /boot (test/deps.sh installs linux-image-cloud-amd64)")
	}
	sort.Strings(kernels)
	return kernels[len(kernels)-1], busybox
}

// fixKVMForTest applies EnsureKVMPermissions to the real /dev/kvm (without it
// libvirt re-probes QEMU for ~50 s per call) and restores owner and mode after.
func fixKVMForTest(t *testing.T) {
	fi, err := os.Stat(DefaultKVMDevice)
	if err != nil {
		return
	}
	st := fi.Sys().(*syscall.Stat_t)
	uid, gid, mode := int(st.Uid), int(st.Gid), fi.Mode().Perm()
	changed, err := EnsureKVMPermissions(DefaultKVMDevice)
	if err != nil {
		t.Fatalf("EnsureKVMPermissions(%s): %v", DefaultKVMDevice, err)
	}
	t.Logf("EnsureKVMPermissions(%s) changed=%v (was %d:%d %v)", DefaultKVMDevice, changed, uid, gid, mode)
	if changed {
		t.Cleanup(func() {
			if err := os.Chown(DefaultKVMDevice, uid, gid); err != nil {
				t.Errorf("restore owner of %s: %v", DefaultKVMDevice, err)
			}
			if err := os.Chmod(DefaultKVMDevice, mode); err != nil {
				t.Errorf("restore mode of %s: %v", DefaultKVMDevice, err)
			}
		})
	}
}

// stopDaemonsStartedByTest terminates, by the PIDs in their pid files, the
// libvirt daemons that were not answering before the test.
func stopDaemonsStartedByTest(t *testing.T) {
	type daemon struct{ sock, pidfile string }
	var stop []daemon
	for _, d := range []daemon{
		{DefaultLibvirtSocket, "/run/libvirtd.pid"},
		{DefaultVirtlogSocket, "/run/virtlogd.pid"},
	} {
		if !socketAnswers(d.sock) {
			stop = append(stop, d)
		}
	}
	t.Cleanup(func() {
		for _, d := range stop {
			b, err := os.ReadFile(d.pidfile)
			if err != nil {
				t.Errorf("pid file of a daemon this test started: %v", err)
				continue
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil || pid <= 1 {
				t.Errorf("bad pid file %s: %q", d.pidfile, b)
				continue
			}
			if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
				t.Errorf("stop pid %d: %v", pid, err)
				continue
			}
			for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
				time.Sleep(100 * time.Millisecond)
			}
			t.Logf("stopped %s (pid %d) started by this test", filepath.Base(d.pidfile), pid)
		}
	})
}

// TestTCGGuestThroughGoLibvirt boots a real TCG guest (Debian kernel + busybox
// initramfs built here) through go-libvirt, waits for /init's marker on the
// serial console file, then destroys and undefines it.
func TestTCGGuestThroughGoLibvirt(t *testing.T) {
	kernelSrc, busybox := libvirtTestEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	fixKVMForTest(t)
	stopDaemonsStartedByTest(t)
	started, err := EnsureLibvirtd(ctx, LibvirtConfig{})
	if err != nil {
		t.Fatalf("EnsureLibvirtd: %v", err)
	}
	t.Logf("EnsureLibvirtd started=%v", started)
	if again, err := EnsureLibvirtd(ctx, LibvirtConfig{}); err != nil || again {
		t.Fatalf("EnsureLibvirtd(already running) = %v, %v, want false, nil", again, err)
	}

	info, err := CheckLibvirt(ctx, DefaultLibvirtSocket)
	if err != nil {
		t.Fatalf("CheckLibvirt: %v", err)
	}
	t.Logf("CheckLibvirt = %+v", info)
	if info.HypervisorType != "QEMU" || !slices.Contains(info.DomainTypes, VirtTypeQEMU) || info.LibVersion == "0.0.0" {
		t.Fatalf("CheckLibvirt = %+v, want QEMU driver offering domain type qemu", info)
	}

	start := time.Now()
	l, err := Connect(ctx, DefaultLibvirtSocket)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Logf("Connect took %s", time.Since(start))
	t.Cleanup(func() { l.Disconnect() })

	// Files qemu (user libvirt-qemu) must reach: a world-traversable dir.
	dir, err := os.MkdirTemp("", "osd-tcg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	kernel := filepath.Join(dir, "vmlinuz")
	kb, err := os.ReadFile(kernelSrc) // a copy: libvirt relabels what it boots
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kernel, kb, 0o644); err != nil {
		t.Fatal(err)
	}
	suffix := randomSuffix(t)
	marker := "OSD-GUEST-UP-" + suffix
	initrd := filepath.Join(dir, "initrd.cpio")
	if err := writeBusyboxInitrd(initrd, busybox, marker); err != nil {
		t.Fatal(err)
	}
	console := filepath.Join(dir, "console.log")
	name := "osdtest-" + suffix

	port := uint(0)
	dom := libvirtxml.Domain{
		Type:   VirtTypeQEMU,
		Name:   name,
		Memory: &libvirtxml.DomainMemory{Value: 192, Unit: "MiB"},
		VCPU:   &libvirtxml.DomainVCPU{Value: 1},
		OS: &libvirtxml.DomainOS{
			Type:    &libvirtxml.DomainOSType{Arch: "x86_64", Type: "hvm"},
			Kernel:  kernel,
			Initrd:  initrd,
			Cmdline: "console=ttyS0 panic=-1 rdinit=/init",
		},
		OnPoweroff: "destroy",
		OnCrash:    "destroy",
		Devices: &libvirtxml.DomainDeviceList{
			Serials: []libvirtxml.DomainSerial{{
				Source: &libvirtxml.DomainChardevSource{File: &libvirtxml.DomainChardevSourceFile{Path: console}},
				Target: &libvirtxml.DomainSerialTarget{Port: &port},
			}},
			MemBalloon: &libvirtxml.DomainMemBalloon{Model: "none"},
		},
	}
	domXML, err := dom.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	d, err := l.DomainDefineXML(domXML)
	if err != nil {
		t.Fatalf("DomainDefineXML: %v", err)
	}
	t.Cleanup(func() { // also on failure: nothing of the guest may remain
		if d, err := l.DomainLookupByName(name); err == nil {
			l.DomainDestroy(d)
			l.DomainUndefine(d)
		}
		os.Remove(filepath.Join("/var/log/libvirt/qemu", name+".log"))
	})

	start = time.Now()
	if err := l.DomainCreate(d); err != nil {
		t.Fatalf("DomainCreate: %v", err)
	}
	createTook := time.Since(start)
	t.Logf("DomainCreate took %s", createTook)
	// With /dev/kvm root 0600 libvirt re-probes QEMU (~50 s) on such calls.
	if createTook > 20*time.Second {
		t.Errorf("DomainCreate took %s, want well under 20 s (is /dev/kvm group kvm 0660?)", createTook)
	}
	line := waitForLine(t, console, marker, 60*time.Second)
	t.Logf("guest marker after %s: %q", time.Since(start), line)

	if state, _, err := l.DomainGetState(d, 0); err != nil || libvirt.DomainState(state) != libvirt.DomainRunning {
		t.Fatalf("DomainGetState(booted guest) = %d, %v, want running", state, err)
	}
	if err := l.DomainDestroy(d); err != nil {
		t.Fatalf("DomainDestroy: %v", err)
	}
	if state, _, err := l.DomainGetState(d, 0); err != nil || libvirt.DomainState(state) != libvirt.DomainShutoff {
		t.Fatalf("DomainGetState(destroyed guest) = %d, %v, want shut off", state, err)
	}
	if err := l.DomainUndefine(d); err != nil {
		t.Fatalf("DomainUndefine: %v", err)
	}
	if _, err := l.DomainLookupByName(name); err == nil {
		t.Fatalf("DomainLookupByName(%s) after undefine succeeded, want not found", name)
	}

	// A warm libvirtd answers quickly when /dev/kvm is right.
	info, err = CheckLibvirt(ctx, DefaultLibvirtSocket)
	if err != nil {
		t.Fatalf("CheckLibvirt(again): %v", err)
	}
	t.Logf("CheckLibvirt (warm) took %.3fs", info.ConnectSeconds)
	if info.ConnectSeconds > 10 {
		t.Errorf("CheckLibvirt(warm) took %.1fs, want under 10 s (is /dev/kvm group kvm 0660?)", info.ConnectSeconds)
	}
}

// waitForLine polls a file until a line containing want appears.
func waitForLine(t *testing.T, path, want string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		b, _ := os.ReadFile(path)
		for _, line := range bytes.Split(b, []byte("\n")) {
			if bytes.Contains(line, []byte(want)) {
				return strings.TrimSpace(string(line))
			}
		}
		if time.Now().After(deadline) {
			tail := b
			if len(tail) > 2000 {
				tail = tail[len(tail)-2000:]
			}
			t.Fatalf("no %q on the console after %s; console tail:\n%s", want, timeout, tail)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
