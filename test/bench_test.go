package test

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkDaemon measures, on a fresh state dir: daemon start to node Ready, the idle
// resident memory of the daemon and its containerd (after the node settles), and the
// latency of GET /1.0. It reports the figures as metrics (`make bench`), it asserts nothing.
func BenchmarkDaemon(b *testing.B) {
	requireRoot(b)
	if os.Getenv("OSD_BENCH") == "" {
		b.Skip("set OSD_BENCH=1 (make bench) to run the daemon benchmark")
	}
	hostToItself(b)
	n := newNode(b)
	n.start()
	t0 := time.Now()
	if out, err := n.osd("init", "--kubernetes-only", "--timeout", "5m"); err != nil {
		b.Fatalf("osd init: %v\n%s", err, out)
	}
	ready := time.Since(t0)
	t0 = time.Now()
	if out, err := n.osd("init", "--kubernetes-only"); err != nil {
		b.Fatalf("osd init (no-op): %v\n%s", err, out)
	}
	noop := time.Since(t0)
	time.Sleep(20 * time.Second) // let the node settle before reading memory
	daemonRSS := rssKiB(n.cmd.Process.Pid)
	var containerdRSS int // containerd hides its arguments: find it as the daemon's child
	for _, pid := range childrenOf(n.cmd.Process.Pid) {
		if cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.HasPrefix(string(cl), "containerd") {
			containerdRSS += rssKiB(pid)
		}
	}
	lat := make([]time.Duration, 0, 1000)
	c := n.httpClient()
	for i := 0; i < 1000; i++ {
		t0 := time.Now()
		resp, err := c.Get("http://osd/1.0")
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		lat = append(lat, time.Since(t0))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(ready.Seconds(), "s-init-to-node-ready")
	b.ReportMetric(noop.Seconds(), "s-noop-init")
	b.ReportMetric(float64(daemonRSS)/1024, "MiB-daemon-rss")
	b.ReportMetric(float64(containerdRSS)/1024, "MiB-containerd-rss")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "us-api-p50")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "us-api-p99")
	fmt.Printf("daemon: osd init to node Ready %s, no-op init %s; idle RSS daemon %d MiB + containerd %d MiB; GET /1.0 p50 %s p99 %s\n",
		ready.Round(100*time.Millisecond), noop.Round(time.Millisecond), daemonRSS/1024, containerdRSS/1024, lat[len(lat)/2], lat[len(lat)*99/100])
}

// childrenOf lists the PIDs whose parent is ppid.
func childrenOf(ppid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		// stat: pid (comm) state ppid ...; comm may hold spaces, so split after ")".
		if i := strings.LastIndexByte(string(b), ')'); i > 0 {
			if f := strings.Fields(string(b[i+1:])); len(f) > 1 && f[1] == strconv.Itoa(ppid) {
				out = append(out, pid)
			}
		}
	}
	return out
}

// rssKiB is a process's resident set size.
func rssKiB(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			v, _ := strconv.Atoi(f[1])
			return v
		}
	}
	return 0
}
