package netsetup

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osdcloud/osd/netsetup/ovsdb"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// requireHost skips unless the test can create namespaces and run OVS daemons.
func requireHost(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root for network namespaces and OVS")
	}
	for _, tool := range []string{"ovsdb-tool", "ovsdb-server", "ovs-vswitchd"} {
		if _, err := exec.LookPath(tool); err != nil {
			tb.Fatalf("needs %s (test/deps.sh installs openvswitch-switch)", tool)
		}
	}
	if _, err := os.Stat("/usr/share/openvswitch/vswitch.ovsschema"); err != nil {
		tb.Fatal("needs the OVS schema (test/deps.sh installs openvswitch-switch)")
	}
}

var nsSeq atomic.Int32

var testSocket string

// newNetNS creates a named network namespace with lo up, deleted at cleanup, and
// returns its path.
func newNetNS(tb testing.TB, role string) string {
	tb.Helper()
	name := fmt.Sprintf("osdt%d-%d-%s", os.Getpid(), nsSeq.Add(1), role)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // left locked if anything fails: the thread is discarded
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		ns, err := netns.NewNamed(name)
		if err != nil {
			errc <- err
			return
		}
		ns.Close()
		if err := netns.Set(orig); err != nil {
			errc <- err
			return
		}
		runtime.UnlockOSThread()
		errc <- nil
	}()
	if err := <-errc; err != nil {
		tb.Fatalf("create netns %s: %v", name, err)
	}
	tb.Cleanup(func() {
		if err := netns.DeleteNamed(name); err != nil {
			tb.Errorf("delete netns %s: %v", name, err)
		}
	})
	path := filepath.Join("/var/run/netns", name)
	nl := nlHandle(tb, path)
	lo, err := nl.LinkByName("lo")
	if err == nil {
		err = nl.LinkSetUp(lo)
	}
	if err != nil {
		tb.Fatalf("lo up in %s: %v", name, err)
	}
	return path
}

func nlHandle(tb testing.TB, nsPath string) *netlink.Handle {
	tb.Helper()
	h, err := netlinkHandle(nsPath)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(h.Close)
	return h
}

// startPrivateOVS runs a private OVS (own db, run and log dirs) inside nsPath and
// stops it at cleanup.
func startPrivateOVS(tb testing.TB, nsPath string) OVSConfig {
	tb.Helper()
	// Unix socket paths are limited to 108 bytes: keep the run dir short.
	dir, err := os.MkdirTemp("", "osdovs")
	if err != nil {
		tb.Fatal(err)
	}
	c := OVSConfig{RunDir: filepath.Join(dir, "run"), DBDir: filepath.Join(dir, "db"), LogDir: filepath.Join(dir, "log"),
		Datapath: DatapathNetdev, NetNS: nsPath}
	tb.Cleanup(func() {
		if err := StopOVS(context.Background(), c); err != nil {
			tb.Errorf("StopOVS: %v", err)
		}
		if tb.Failed() {
			for _, f := range []string{"ovs-vswitchd.log", "ovsdb-server.log"} {
				b, _ := os.ReadFile(filepath.Join(c.LogDir, f))
				tb.Logf("%s:\n%s", f, b)
			}
		}
		os.RemoveAll(dir)
	})
	testSocket = c.Socket()
	start := time.Now()
	changed, err := EnsureOVS(context.Background(), c)
	if err != nil {
		tb.Fatalf("EnsureOVS = %v, want nil", err)
	}
	if !changed {
		tb.Fatalf("EnsureOVS on a fresh dir = changed false, want true")
	}
	tb.Logf("private OVS started in %v", time.Since(start))
	return c
}

func connectOVS(tb testing.TB, c OVSConfig) *ovsdb.OVS {
	tb.Helper()
	o, err := ConnectOVS(context.Background(), c)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(o.Close)
	return o
}

// veth creates a veth pair: hostName in hostNS and peerName in peerNS, both up,
// peerAddr (if set) on the peer and hostAddr (if set) on the host end.
func veth(tb testing.TB, hostNS, hostName, hostAddr, peerNS, peerName, peerAddr string) {
	tb.Helper()
	h := nlHandle(tb, hostNS)
	p := nlHandle(tb, peerNS)
	peerFd, err := os.Open(peerNS)
	if err != nil {
		tb.Fatal(err)
	}
	defer peerFd.Close()
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: hostName}, PeerName: peerName,
		PeerNamespace: netlink.NsFd(int(peerFd.Fd()))}
	if err := h.LinkAdd(v); err != nil {
		tb.Fatalf("veth %s/%s: %v", hostName, peerName, err)
	}
	for _, side := range []struct {
		nl         *netlink.Handle
		name, addr string
	}{{h, hostName, hostAddr}, {p, peerName, peerAddr}} {
		l, err := side.nl.LinkByName(side.name)
		if err != nil {
			tb.Fatal(err)
		}
		if side.addr != "" {
			a, err := netlink.ParseAddr(side.addr)
			if err != nil {
				tb.Fatal(err)
			}
			if err := side.nl.AddrAdd(l, a); err != nil {
				tb.Fatalf("add %s to %s: %v", side.addr, side.name, err)
			}
		}
		if err := side.nl.LinkSetUp(l); err != nil {
			tb.Fatal(err)
		}
	}
}

func addDefaultRoute(tb testing.TB, nsPath, dev, gw string) {
	tb.Helper()
	nl := nlHandle(tb, nsPath)
	l, err := nl.LinkByName(dev)
	if err != nil {
		tb.Fatal(err)
	}
	if err := nl.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: net.ParseIP(gw)}); err != nil {
		tb.Fatalf("default route via %s: %v", gw, err)
	}
}

// waitPortReady waits until vswitchd attached port.
func waitPortReady(tb testing.TB, o *ovsdb.OVS, port string) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, msg, err := o.InterfaceReady(context.Background(), port)
		if err != nil {
			tb.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			out, _ := exec.Command("ovs-vsctl", "--db=unix:"+testSocket, "list", "interface").CombinedOutput()
			tb.Logf("%s", out)
			tb.Fatalf("InterfaceReady(%s) = false (error %q), want true", port, msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// tcpExchange listens on listenAddr in listenNS, dials it from dialNS, sends size
// bytes each way and returns the client address the listener saw.
func tcpExchange(tb testing.TB, listenNS, listenAddr, dialNS string, size int) string {
	tb.Helper()
	var ln net.Listener
	if err := inNetNS(listenNS, func() (err error) { ln, err = net.Listen("tcp4", listenAddr); return err }); err != nil {
		tb.Fatalf("listen %s: %v", listenAddr, err)
	}
	defer ln.Close()
	type result struct {
		remote string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		buf := make([]byte, size)
		if _, err := io.ReadFull(c, buf); err != nil {
			done <- result{err: fmt.Errorf("server read: %w", err)}
			return
		}
		if _, err := c.Write(buf); err != nil {
			done <- result{err: fmt.Errorf("server write: %w", err)}
			return
		}
		done <- result{remote: c.RemoteAddr().(*net.TCPAddr).IP.String()}
	}()
	var c net.Conn
	err := inNetNS(dialNS, func() (err error) {
		c, err = net.DialTimeout("tcp4", listenAddr, 5*time.Second)
		return err
	})
	if err != nil {
		tb.Fatalf("dial %s: %v", listenAddr, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	go func() { _, _ = c.Write(payload) }()
	echo := make([]byte, size)
	if _, err := io.ReadFull(c, echo); err != nil {
		tb.Fatalf("client read echo from %s: %v", listenAddr, err)
	}
	for i := range echo {
		if echo[i] != payload[i] {
			tb.Fatalf("echo byte %d = %d, want %d", i, echo[i], payload[i])
		}
	}
	r := <-done
	if r.err != nil {
		tb.Fatal(r.err)
	}
	return r.remote
}

func ping(tb testing.TB, nsPath, dst string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := Ping(ctx, nsPath, dst); err != nil {
		tb.Fatalf("Ping(%s) from %s = %v, want nil", dst, filepath.Base(nsPath), err)
	}
}

// memSaved is a SavedState in memory, kept as the JSON a caller would store.
type memSaved struct{ b []byte }

func (m *memSaved) Load() (Saved, error) {
	var s Saved
	if m.b == nil {
		return s, nil
	}
	return s, json.Unmarshal(m.b, &s)
}

func (m *memSaved) Save(s Saved) error {
	if s.Empty() {
		m.b = nil
		return nil
	}
	b, err := json.Marshal(s)
	m.b = b
	return err
}
