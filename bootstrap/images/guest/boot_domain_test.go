package guest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"
	"github.com/osdcloud/osd/hypervisor"
	"libvirt.org/go/libvirtxml"
)

// startLibvirt connects to the host's libvirtd, starting it (and virtlogd) when none
// answers; those it started are stopped when the test ends.
func startLibvirt(t *testing.T) *libvirt.Libvirt {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	started, err := hypervisor.EnsureLibvirtd(ctx, hypervisor.LibvirtConfig{})
	if err != nil {
		t.Fatalf("EnsureLibvirtd: %v", err)
	}
	if started {
		t.Cleanup(func() { stopByPidFile(t, "/run/libvirtd.pid"); stopByPidFile(t, "/run/virtlogd.pid") })
	}
	l, err := hypervisor.Connect(ctx, hypervisor.DefaultLibvirtSocket)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { l.Disconnect() })
	return l
}

// bootSpec is one test boot: the kernel, initramfs and command line (the image's
// os_command_line; Nova's console=hvc0 is added), the bridge the NIC plugs into and the
// config drive to attach ("" for none).
type bootSpec struct {
	kernel, initrd, cmdline string
	bridge, drive           string
}

// booted is a guest a test started: its libvirt domain, the file its serial console is
// logged to and when it was started.
type booted struct {
	name, console string
	dom           libvirt.Domain
	start         time.Time
}

// bootGuest defines and starts a QEMU (TCG) domain under libvirt as Nova defines one for
// the test image: direct kernel boot with the machine image's command line and then Nova's
// console=hvc0 (ttyS0 is not the last console), ACPI, the serial console logged to a file,
// a virtio NIC, the machine image's raw disk on virtio-blk and the config drive as an IDE
// CD-ROM. dir holds copies of what it boots (libvirt relabels and chowns them). The
// domain is destroyed and undefined when the test ends.
func bootGuest(t *testing.T, l *libvirt.Libvirt, dir string, s bootSpec) booted {
	t.Helper()
	kernel, initrd := filepath.Join(dir, "vmlinuz"), filepath.Join(dir, "initrd.img")
	for src, dst := range map[string]string{s.kernel: kernel, s.initrd: initrd} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The machine image: a disk of zeros (as day-one uploads it, 1 MiB).
	disk := filepath.Join(dir, "disk")
	if err := os.WriteFile(disk, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	console := filepath.Join(dir, "console.log")
	name := "osdguest-" + randomHex(t, 4)
	mac := "52:54:00:" + strings.Join([]string{randomHex(t, 1), randomHex(t, 1), randomHex(t, 1)}, ":")
	port := uint(0)
	disks := []libvirtxml.DomainDisk{{
		Device: "disk",
		Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
		Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: disk}},
		Target: &libvirtxml.DomainDiskTarget{Dev: "vda", Bus: "virtio"},
	}}
	if s.drive != "" {
		// As Nova attaches a config drive on QEMU's pc machine: an IDE CD-ROM.
		disks = append(disks, libvirtxml.DomainDisk{
			Device:   "cdrom",
			Driver:   &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
			Source:   &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: s.drive}},
			Target:   &libvirtxml.DomainDiskTarget{Dev: "hdd", Bus: "ide"},
			ReadOnly: &libvirtxml.DomainDiskReadOnly{},
		})
	}
	dom := libvirtxml.Domain{
		Type: "qemu", Name: name,
		Memory: &libvirtxml.DomainMemory{Value: 256, Unit: "MiB"},
		VCPU:   &libvirtxml.DomainVCPU{Value: 1},
		OS: &libvirtxml.DomainOS{
			Type:   &libvirtxml.DomainOSType{Arch: "x86_64", Type: "hvm"},
			Kernel: kernel, Initrd: initrd,
			Cmdline: s.cmdline + " console=hvc0",
		},
		// As Nova defines every x86 guest: with ACPI (its power button is the soft power off).
		Features:   &libvirtxml.DomainFeatureList{ACPI: &libvirtxml.DomainFeature{}, APIC: &libvirtxml.DomainFeatureAPIC{}},
		OnPoweroff: "destroy", OnCrash: "destroy",
		Devices: &libvirtxml.DomainDeviceList{
			Serials: []libvirtxml.DomainSerial{{
				Source: &libvirtxml.DomainChardevSource{File: &libvirtxml.DomainChardevSourceFile{Path: console}},
				Target: &libvirtxml.DomainSerialTarget{Port: &port},
			}},
			Interfaces: []libvirtxml.DomainInterface{{
				MAC:    &libvirtxml.DomainInterfaceMAC{Address: mac},
				Source: &libvirtxml.DomainInterfaceSource{Bridge: &libvirtxml.DomainInterfaceSourceBridge{Bridge: s.bridge}},
				Model:  &libvirtxml.DomainInterfaceModel{Type: "virtio"},
			}},
			Disks:      disks,
			MemBalloon: &libvirtxml.DomainMemBalloon{Model: "none"},
		},
	}
	xml, err := dom.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	d, err := l.DomainDefineXML(xml)
	if err != nil {
		t.Fatalf("DomainDefineXML: %v", err)
	}
	t.Cleanup(func() {
		if d, err := l.DomainLookupByName(name); err == nil {
			l.DomainDestroy(d)
			l.DomainUndefine(d)
		}
		os.Remove(filepath.Join("/var/log/libvirt/qemu", name+".log"))
	})
	start := time.Now()
	if err := l.DomainCreate(d); err != nil {
		t.Fatalf("DomainCreate: %v", err)
	}
	return booted{name: name, console: console, dom: d, start: start}
}
