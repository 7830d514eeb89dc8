package netsetup

import (
	"context"
	"fmt"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func TestBringTapUp(t *testing.T) {
	const promisc, up = unix.IFF_PROMISC | unix.IFF_BROADCAST | unix.IFF_MULTICAST, unix.IFF_UP
	for _, tt := range []struct {
		name     string
		l        GuestTapLink
		leftDown bool
		bringUp  bool
	}{
		{"a Neutron port's tap left down by vswitchd", GuestTapLink{Kind: "tuntap", Flags: promisc, NeutronPort: true}, true, true},
		{"an OVS port that is no Neutron port's (or not asked yet)", GuestTapLink{Kind: "tuntap", Flags: promisc}, true, false},
		{"up already", GuestTapLink{Kind: "tuntap", Flags: promisc | up, NeutronPort: true}, false, false},
		{"down and not promiscuous: not vswitchd's port (yet)", GuestTapLink{Kind: "tuntap", Flags: unix.IFF_BROADCAST, NeutronPort: true}, false, false},
		{"a veth", GuestTapLink{Kind: "veth", Flags: promisc, NeutronPort: true}, false, false},
		{"an OVS internal port", GuestTapLink{Kind: "openvswitch", Flags: promisc, NeutronPort: true}, false, false},
	} {
		if got := TapLeftDown(tt.l); got != tt.leftDown {
			t.Errorf("%s: TapLeftDown = %v, want %v", tt.name, got, tt.leftDown)
		}
		if got := BringTapUp(tt.l); got != tt.bringUp {
			t.Errorf("%s: BringTapUp = %v, want %v", tt.name, got, tt.bringUp)
		}
	}
}

// TestGuestTapsKeptUp runs KeepGuestTapsUp against a private OVS on the userspace datapath:
// a Neutron port's tap taken down after vswitchd made it promiscuous comes back up, other
// taps are left alone, and taps made as libvirt makes a guest's (the port first, then the
// tap created and brought up at once, which races with vswitchd) are all up.
func TestGuestTapsKeptUp(t *testing.T) {
	requireHost(t)
	hostNS := newNetNS(t, "host")
	c := startPrivateOVS(t, hostNS)
	o := connectOVS(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := o.EnsureBridge(ctx, "br-int", DatapathNetdev); err != nil {
		t.Fatal(err)
	}
	nl := nlHandle(t, hostNS)
	var mu sync.Mutex
	fixed := map[string]int{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		KeepGuestTapsUp(ctx, c, func(name string) {
			mu.Lock()
			fixed[name]++
			mu.Unlock()
		})
	}()
	defer func() { cancel(); wg.Wait() }()

	vsctl := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ovs-vsctl", append([]string{"--db=unix:" + c.Socket(), "--timeout=10"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ovs-vsctl %v: %v\n%s", args, err, out)
		}
	}
	// makeTap creates a tap in the namespace and brings it up at once, as libvirt does.
	makeTap := func(name string) {
		t.Helper()
		err := inNetNS(hostNS, func() error {
			if err := netlink.LinkAdd(&netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: name}, Mode: netlink.TUNTAP_MODE_TAP, Flags: netlink.TUNTAP_DEFAULTS}); err != nil {
				return err
			}
			l, err := netlink.LinkByName(name)
			if err != nil {
				return err
			}
			return netlink.LinkSetUp(l)
		})
		if err != nil {
			t.Fatalf("tap %s: %v", name, err)
		}
	}
	flags := func(name string) uint32 {
		t.Helper()
		l, err := nl.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		return l.Attrs().RawFlags
	}
	waitFlags := func(name string, want func(uint32) bool, within time.Duration) bool {
		for end := time.Now().Add(within); ; time.Sleep(50 * time.Millisecond) {
			if want(flags(name)) {
				return true
			}
			if time.Now().After(end) {
				return false
			}
		}
	}
	isUp := func(f uint32) bool { return f&unix.IFF_UP != 0 }
	promiscUp := func(f uint32) bool { return f&unix.IFF_PROMISC != 0 && f&unix.IFF_UP != 0 }
	setDown := func(name string) {
		t.Helper()
		l, err := nl.LinkByName(name)
		if err == nil {
			err = nl.LinkSetDown(l)
		}
		if err != nil {
			t.Fatal(err)
		}
	}

	// A Neutron port's tap, a plain OVS port's tap and a tap OVS does not know, each
	// promiscuous and up, then taken down.
	makeTap("tapneutron")
	vsctl("add-port", "br-int", "tapneutron", "--", "set", "Interface", "tapneutron", "external_ids:iface-id=port-1")
	makeTap("tapplain")
	vsctl("add-port", "br-int", "tapplain")
	makeTap("tapalone")
	if err := inNetNS(hostNS, func() error {
		l, err := netlink.LinkByName("tapalone")
		if err == nil {
			err = netlink.SetPromiscOn(l)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"tapneutron", "tapplain", "tapalone"} {
		if !waitFlags(name, promiscUp, 10*time.Second) {
			t.Fatalf("%s: flags %#x, want promiscuous and up before the test takes it down", name, flags(name))
		}
		setDown(name)
	}
	if !waitFlags("tapneutron", isUp, 5*time.Second) {
		t.Errorf("a Neutron port's tap taken down after vswitchd made it promiscuous: flags %#x after 5 s, want up again", flags("tapneutron"))
	}
	time.Sleep(time.Second)
	for _, name := range []string{"tapplain", "tapalone"} {
		if f := flags(name); isUp(f) {
			t.Errorf("%s (no Neutron port) was brought up (flags %#x): the keeper must leave it alone", name, f)
		}
	}

	// Taps as libvirt makes a guest's.
	const n = 20
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("tapguest%d", i)
		vsctl("--no-wait", "add-port", "br-int", name, "--", "set", "Interface", name, "external_ids:iface-id=guest-"+name)
		time.Sleep(100 * time.Millisecond)
		makeTap(name)
	}
	down := 0
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("tapguest%d", i)
		if !waitFlags(name, promiscUp, 10*time.Second) {
			down++
			t.Errorf("%s: flags %#x 10 s after libvirt's way of making it, want promiscuous and up", name, flags(name))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	delete(fixed, "tapneutron")
	t.Logf("taps made as libvirt makes them: %d of %d up; the keeper brought up %d that vswitchd had taken down (%v)", n-down, n, len(fixed), fixed)
}
