package guest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// bootPhases are what TestBootTiming measures of one boot, in seconds: from the host, the
// time since the domain was started until each was seen (the console is read every 25 ms);
// from the guest, its uptime in the marker lines.
var bootPhases = []string{
	"host: first console output",
	"host: /init started",
	"host: DHCP lease",
	"host: answers ping",
	"host: ssh server listening",
	"host: metadata read, keys installed",
	"host: first SSH login",
	"guest: kernel to /init",
	"guest: /init to lease",
	"guest: /init to ssh listening",
}

// TestBootTiming boots guest images again and again under QEMU TCG through libvirt, as
// TestBuildBootDHCP does (a bridge to a namespace with udhcpd and a metadata service, a
// config drive, a virtio disk), and reports where each boot's time goes: the median and
// range of each of bootPhases per image. It runs only when OSD_GUEST_BOOTS says how many
// boots per image. OSD_GUEST_IMAGES lists image directories (comma-separated; each with
// vmlinuz, initrd.img and, optionally, cmdline: the kernel command line, CommandLine by
// default), booted in turn so that the machine's load weighs on each alike; without it,
// the image Build makes is booted (cached in OSD_GUEST_CACHE, else in a fresh directory).
// OSD_GUEST_CONSOLES names a directory to keep each boot's console log (and udhcpd's) in.
func TestBootTiming(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("OSD_GUEST_BOOTS"))
	if n <= 0 {
		t.Skip("OSD_GUEST_BOOTS (boots per image) not set")
	}
	need(t, "ip", "busybox", "libvirtd", "virtlogd", "qemu-system-x86_64", "genisoimage", "ping")
	type image struct{ name, kernel, initrd, cmdline string }
	var imgs []image
	for _, d := range strings.Split(os.Getenv("OSD_GUEST_IMAGES"), ",") {
		if d == "" {
			continue
		}
		cmdline := CommandLine
		if b, err := os.ReadFile(filepath.Join(d, "cmdline")); err == nil {
			cmdline = strings.TrimSpace(string(b))
		}
		imgs = append(imgs, image{filepath.Base(d), filepath.Join(d, "vmlinuz"), filepath.Join(d, "initrd.img"), cmdline})
	}
	if len(imgs) == 0 {
		need(t, "apt-get", "dpkg-deb", "depmod")
		cache := os.Getenv("OSD_GUEST_CACHE")
		if cache == "" {
			cache = t.TempDir()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		img, err := Build(ctx, Options{CacheDir: cache})
		cancel()
		if err != nil {
			t.Fatalf("Build: %v", err)
		}
		t.Logf("image %s (%s)", img.Key[:16], filepath.Dir(img.Initrd))
		imgs = append(imgs, image{img.Key[:16], img.Kernel, img.Initrd, CommandLine})
	}
	l := startLibvirt(t)
	results := map[string][]map[string]float64{}
	for i := 0; i < n; i++ {
		for _, im := range imgs {
			t.Run(fmt.Sprintf("%s/%d", im.name, i), func(t *testing.T) {
				dir := guestDir(t)
				keyFile, publicKey := testKey(t, dir)
				tn := makeTestNet(t, dir, publicKey)
				drive := configDrive(t, dir, metaData("0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9", tn.hostname+".novalocal", ""))
				load, _ := os.ReadFile("/proc/loadavg")
				g := bootGuest(t, l, dir, bootSpec{kernel: im.kernel, initrd: im.initrd, cmdline: im.cmdline, bridge: tn.bridge, drive: drive})
				m := timeBoot(t, g, tn, keyFile)
				if keep := os.Getenv("OSD_GUEST_CONSOLES"); keep != "" {
					b, _ := os.ReadFile(g.console)
					os.WriteFile(filepath.Join(keep, fmt.Sprintf("%s-%d.log", im.name, i)), b, 0o644)
					b, _ = os.ReadFile(filepath.Join(dir, "udhcpd.log"))
					os.WriteFile(filepath.Join(keep, fmt.Sprintf("%s-%d.udhcpd.log", im.name, i)), b, 0o644)
				}
				results[im.name] = append(results[im.name], m)
				var parts []string
				for _, p := range bootPhases {
					if v, ok := m[p]; ok {
						parts = append(parts, fmt.Sprintf("%s %.2f", p, v))
					}
				}
				t.Logf("load %s; %s", strings.Join(strings.Fields(string(load))[:3], " "), strings.Join(parts, ", "))
			})
		}
	}
	for _, im := range imgs {
		var lines []string
		for _, p := range bootPhases {
			var vs []float64
			for _, m := range results[im.name] {
				if v, ok := m[p]; ok {
					vs = append(vs, v)
				}
			}
			if len(vs) == 0 {
				continue
			}
			sort.Float64s(vs)
			lines = append(lines, fmt.Sprintf("  %-38s median %5.2f s  range %5.2f-%5.2f  (%d boots)", p, median(vs), vs[0], vs[len(vs)-1], len(vs)))
		}
		t.Logf("image %s, command line %q:\n%s", im.name, im.cmdline, strings.Join(lines, "\n"))
	}
}

// timeBoot watches a booted guest until its first SSH login (or 3 minutes) and returns
// the phases of bootPhases it saw.
func timeBoot(t *testing.T, g booted, tn testNet, keyFile string) map[string]float64 {
	t.Helper()
	m := map[string]float64{}
	since := func() float64 { return time.Since(g.start).Seconds() }
	seen := func(p string) {
		if _, ok := m[p]; !ok {
			m[p] = since()
		}
	}
	var c Console
	var ip string
	pinged := false
	for deadline := g.start.Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(25 * time.Millisecond) {
		b, _ := os.ReadFile(g.console)
		if len(b) > 0 {
			seen("host: first console output")
		}
		c = ParseConsole(string(b))
		if c.Started && c.InitUptime > 0 {
			seen("host: /init started")
		}
		if c.Address != "" {
			seen("host: DHCP lease")
			if a, _, err := net.ParseCIDR(c.Address); err == nil {
				ip = a.String()
			}
		}
		if c.SSHListening {
			seen("host: ssh server listening")
		}
		if c.SSHKeys != "" && c.MetadataUUID != "" {
			seen("host: metadata read, keys installed")
		}
		if ip != "" && !pinged {
			if exec.Command("ip", "netns", "exec", tn.ns, "ping", "-c1", "-W1", ip).Run() == nil {
				seen("host: answers ping")
				pinged = true
			}
		}
		if pinged && c.SSHHostKey != "" && c.SSHKeys != "" {
			if out, err := goSSHInNamespace(tn.ns, ip, keyFile, c.SSHHostKey, "true; echo ok"); err == nil && strings.TrimSpace(out) == "ok" {
				seen("host: first SSH login")
				break
			}
		}
	}
	if _, ok := m["host: first SSH login"]; !ok {
		b, _ := os.ReadFile(g.console)
		t.Errorf("guest %s: no SSH login after 3 minutes (parsed %+v); console:\n%s", g.name, c, tailLines(string(b), 30))
	}
	if c.InitUptime > 0 {
		m["guest: kernel to /init"] = c.InitUptime
		if c.LeaseUptime > 0 {
			m["guest: /init to lease"] = c.LeaseUptime - c.InitUptime
		}
		if c.SSHUptime > 0 {
			m["guest: /init to ssh listening"] = c.SSHUptime - c.InitUptime
		}
	}
	return m
}

// median of sorted values.
func median(vs []float64) float64 {
	if len(vs)%2 == 1 {
		return vs[len(vs)/2]
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
}
