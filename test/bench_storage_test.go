package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkStorage measures block storage on a deployed cloud (make bench with OSD_E2E=1):
// volume create and attach latency (p50 of 5), a server booted from a volume against one
// booted from the image (create to ACTIVE, and to its floating IP's ping), sequential
// writes through a guest's volume (QEMU's RBD driver, as the guest's disk requests go)
// against the same amount written into a file on the host's disk, and the idle memory
// (PSS) of the Ceph and Cinder pods and of the whole stack.
func BenchmarkStorage(b *testing.B) {
	requireE2E(b)
	if os.Getenv("OSD_BENCH") == "" {
		b.Skip("set OSD_BENCH=1 as well (make bench)")
	}
	hostToItself(b) // a fresh deployment of its own, not the shared cloud
	n := newNode(b)
	n.start()
	if out, err := n.osd("init", "--timeout", "60m"); err != nil {
		b.Fatalf("osd init: %v\n%s", err, out)
	}
	time.Sleep(60 * time.Second) // idle
	groups := pssGroups(n)
	table, total := pssTable(groups)
	sums := map[string]int{}
	for g, kib := range groups {
		for _, part := range []string{"ceph", "cinder"} {
			if strings.HasPrefix(g, "openstack/"+part+"-") {
				sums[part] += kib
				b.ReportMetric(float64(kib)/1024, "MiB-pss-"+strings.TrimPrefix(g, "openstack/"))
			}
		}
	}
	for part, kib := range sums {
		b.ReportMetric(float64(kib)/1024, "MiB-pss-"+part)
	}
	b.ReportMetric(float64(total)/1024, "MiB-stack-pss")
	fmt.Printf("storage: idle PSS by part of the stack:\n%s", table)

	var creates, attaches []time.Duration
	srv, _ := n.createServer(b, "bench-st-a", "--image", "osd-test")
	defer n.openstack("server", "delete", "--wait", srv)
	var vols []string
	defer func() {
		for _, v := range vols {
			n.openstack("volume", "delete", v)
		}
	}()
	for i := 0; i < 5; i++ {
		v, took := n.createVolume(b, fmt.Sprintf("bench-st-%d", i), 1)
		vols = append(vols, v)
		creates = append(creates, took)
	}
	for _, v := range vols[:3] {
		attaches = append(attaches, n.attach(b, srv, v))
		n.detach(b, srv, v)
	}
	b.ReportMetric(p50(creates).Seconds(), "s-volume-create-p50")
	b.ReportMetric(p50(attaches).Seconds(), "s-volume-attach-p50")

	// Boot from the image and from a volume made from it: create to ACTIVE and to ping.
	boot := func(name string, args ...string) (active, ping time.Duration) {
		t0 := time.Now()
		id, _ := n.createServer(b, name, args...)
		active = time.Since(t0)
		fip := n.value(b, "floating", "ip", "create", "external", "-f", "value", "-c", "floating_ip_address")
		defer n.openstack("floating", "ip", "delete", fip)
		defer n.openstack("server", "delete", "--wait", id)
		if out, err := n.openstack("server", "add", "floating", "ip", id, fip); err != nil {
			b.Fatalf("add floating ip: %v\n%s", err, out)
		}
		if _, err := waitPing(fip, 5*time.Minute); err != nil {
			b.Fatal(err)
		}
		return active, time.Since(t0)
	}
	imgActive, imgPing := boot("bench-st-image", "--image", "osd-test")
	volActive, volPing := boot("bench-st-bfv", "--image", "osd-test", "--boot-from-volume", "1")
	b.ReportMetric(imgActive.Seconds(), "s-boot-image-active")
	b.ReportMetric(volActive.Seconds(), "s-boot-volume-active")
	b.ReportMetric(imgPing.Seconds(), "s-boot-image-ping")
	b.ReportMetric(volPing.Seconds(), "s-boot-volume-ping")
	b.ReportMetric(volPing.Seconds()/imgPing.Seconds(), "x-boot-volume-vs-image")

	// Sequential write of 256 MiB inside the guest, through its volume: dd as root on the
	// server's console, timed by the guest's /proc/uptime around it (10 ms steps).
	n.attach(b, srv, vols[4])
	console, err := n.guestConsole(b, srv, guestConsolePassword)
	if err != nil {
		b.Fatal(err)
	}
	checkRBDDisk(b, console.domain, vols[4])
	out := console.run(b, fmt.Sprintf("a=$(cut -d' ' -f1 /proc/uptime); dd if=/dev/zero of=%s bs=1M count=256 conv=fsync 2>&1; echo took $a $(cut -d' ' -f1 /proc/uptime)", device(vols[4])), 15*time.Minute)
	guestSeconds, ok := uptimeSpan(out)
	if !ok || !strings.Contains(out, "256+0 records out") {
		b.Fatalf("dd of 256 MiB onto the volume in the guest: %q", out)
	}
	guestMBps := 256 / guestSeconds
	file := filepath.Join(n.stateDir, "bench-write.img")
	defer os.Remove(file)
	t0 := time.Now()
	if out, err := exec.Command("dd", "if=/dev/zero", "of="+file, "bs=1M", "count=256", "conv=fsync").CombinedOutput(); err != nil {
		b.Fatalf("dd: %v\n%s", err, out)
	}
	hostMBps := 256 / time.Since(t0).Seconds()
	b.ReportMetric(guestMBps, "MiB/s-write-volume")
	b.ReportMetric(hostMBps, "MiB/s-write-host-file")
	b.ReportMetric(guestMBps/hostMBps, "x-volume-vs-host-write")
	n.detach(b, srv, vols[4])
	fmt.Printf("storage: volume create p50 %s, attach p50 %s; boot ACTIVE image %s volume %s, ping image %s volume %s; write volume %.0f MiB/s host file %.0f MiB/s\n",
		p50(creates).Round(time.Millisecond), p50(attaches).Round(time.Millisecond), imgActive.Round(time.Millisecond), volActive.Round(time.Millisecond),
		imgPing.Round(time.Millisecond), volPing.Round(time.Millisecond), guestMBps, hostMBps)
}

func p50(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// uptimeSpan reads the line "took A B" (two of the guest's /proc/uptime readings, in
// seconds) and returns B - A; ok is false without such a line or with B <= A.
func uptimeSpan(out string) (float64, bool) {
	m := regexp.MustCompile(`(?m)^took ([0-9]+\.[0-9]+) ([0-9]+\.[0-9]+)$`).FindStringSubmatch(out)
	if m == nil {
		return 0, false
	}
	a, _ := strconv.ParseFloat(m[1], 64)
	b, _ := strconv.ParseFloat(m[2], 64)
	return b - a, b > a
}

// TestUptimeSpan reads the span between the guest's two /proc/uptime readings, and
// nothing from output without them or with time running backwards.
func TestUptimeSpan(t *testing.T) {
	for _, tc := range []struct {
		out  string
		want float64
		ok   bool
	}{
		{"256+0 records in\n256+0 records out\ntook 61.25 75.75\n", 14.5, true},
		{"dd: /dev/vdb: No space left on device\ntook 61.25 61.30\n", 0.05, true},
		{"256+0 records out\n", 0, false},
		{"took 75.75 61.25\n", 0, false},
		{"took 61.25\n", 0, false},
	} {
		got, ok := uptimeSpan(tc.out)
		if ok != tc.ok || (ok && (got < tc.want-1e-9 || got > tc.want+1e-9)) {
			t.Errorf("uptimeSpan(%q) = %v, %v, want %v, %v", tc.out, got, ok, tc.want, tc.ok)
		}
	}
}
