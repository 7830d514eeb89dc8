package netsetup

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// natLab is a "host" namespace with a private OVS and an uplink veth to an "outside"
// namespace (192.0.2.0/24, documentation addresses living only in these namespaces).
type natLab struct {
	host, outside string
	ovs           OVSConfig
	h             Host
	spec          Spec
}

func newNATLab(t testing.TB) *natLab {
	l := &natLab{host: newNetNS(t, "host"), outside: newNetNS(t, "out")}
	l.ovs = startPrivateOVS(t, l.host)
	veth(t, l.host, "up0", "192.0.2.1/24", l.outside, "eth0", "192.0.2.2/24")
	l.h = Host{NetNS: l.host, OVSSocket: l.ovs.Socket(), Saved: &memSaved{}}
	l.spec = Spec{Datapath: DatapathNetdev, External: DefaultExternalNetwork()}
	return l
}

// attachVM creates namespace "vm" with eth0 at addr (in the external network),
// default route via gw, its peer a port of the bridge.
func (l *natLab) attachVM(t testing.TB, addr, gw string) string {
	vm := newNetNS(t, "vm")
	veth(t, l.host, "vmp", "", vm, "eth0", addr)
	addDefaultRoute(t, vm, "eth0", gw)
	o := connectOVS(t, l.ovs)
	if _, err := o.EnsurePort(context.Background(), l.spec.External.Bridge, "vmp", ""); err != nil {
		t.Fatal(err)
	}
	waitPortReady(t, o, "vmp")
	return vm
}

func (l *natLab) ensure(t testing.TB) (bool, time.Duration) {
	start := time.Now()
	changed, err := EnsureExternalNetwork(context.Background(), l.h, l.spec)
	if err != nil {
		t.Fatalf("EnsureExternalNetwork = %v, want nil", err)
	}
	return changed, time.Since(start)
}

func (l *natLab) plan(t testing.TB) []Op {
	o := connectOVS(t, l.ovs)
	spec, err := normalize(l.spec)
	if err != nil {
		t.Fatal(err)
	}
	st, err := Observe(context.Background(), l.h, o, spec)
	if err != nil {
		t.Fatalf("Observe = %v", err)
	}
	return Plan(st, spec)
}

// TestExternalNetworkNAT: br-ex gets the gateway address, a VM on br-ex reaches a
// namespace beyond the uplink, which sees the host's uplink address (masquerade).
func TestExternalNetworkNAT(t *testing.T) {
	requireHost(t)
	l := newNATLab(t)
	changed, took := l.ensure(t)
	if !changed {
		t.Fatalf("EnsureExternalNetwork(cold) changed = false, want true")
	}
	t.Logf("cold EnsureExternalNetwork: %v", took)
	vm := l.attachVM(t, "172.24.4.10/24", "172.24.4.1")

	ping(t, vm, "172.24.4.1")
	ping(t, vm, "192.0.2.2")
	if got := tcpExchange(t, l.outside, "192.0.2.2:5002", vm, 1<<20); got != "192.0.2.1" {
		t.Fatalf("source seen by outside = %s, want 192.0.2.1 (the host's uplink, masqueraded)", got)
	}
	// Without osd's table the outside namespace would see the VM's own address,
	// which it cannot route back to: the NAT is what makes this work.
	if _, err := deleteNAT(l.host); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if err := Ping(ctx, vm, "192.0.2.2"); err == nil {
		t.Fatalf("Ping(192.0.2.2) without NAT = nil, want no answer")
	}
	if ops := l.plan(t); len(ops) != 1 || ops[0].Kind != OpEnsureNAT {
		t.Fatalf("Plan after NAT removal = %v, want [ensure-nat]", ops)
	}
	if changed, _ := l.ensure(t); !changed {
		t.Fatalf("EnsureExternalNetwork after NAT removal changed = false, want true")
	}
	ping(t, vm, "192.0.2.2")
}

// TestExternalNetworkIdempotentAndTeardown: a second ensure changes nothing and plans
// nothing; Teardown leaves no bridge, no link, no table, ip_forward as it was.
func TestExternalNetworkIdempotentAndTeardown(t *testing.T) {
	requireHost(t)
	l := newNATLab(t)
	// A new namespace copies the host's ip_forward; start from 0 so that restoring it is seen.
	if err := writeIPForward(l.host, "0"); err != nil {
		t.Fatal(err)
	}
	fwdBefore, err := readIPForward(l.host)
	if err != nil {
		t.Fatal(err)
	}
	if fwdBefore != "0" {
		t.Fatalf("ip_forward in the test namespace = %s after setting it to 0", fwdBefore)
	}
	if changed, _ := l.ensure(t); !changed {
		t.Fatalf("EnsureExternalNetwork(cold) changed = false, want true")
	}
	if ops := l.plan(t); len(ops) != 0 {
		t.Fatalf("Plan after ensure = %v, want none", ops)
	}
	changed, took := l.ensure(t)
	if changed {
		t.Fatalf("EnsureExternalNetwork(again) changed = true, want false")
	}
	t.Logf("no-op EnsureExternalNetwork: %v", took)

	nl := nlHandle(t, l.host)
	br, err := nl.LinkByName("br-ex")
	if err != nil {
		t.Fatalf("br-ex link: %v", err)
	}
	addrs, _ := nl.AddrList(br, netlink.FAMILY_V4)
	if len(addrs) != 1 || addrs[0].IPNet.String() != "172.24.4.1/24" {
		t.Fatalf("br-ex addresses = %v, want [172.24.4.1/24]", addrs)
	}
	if v, _ := readIPForward(l.host); v != "1" {
		t.Fatalf("ip_forward = %s, want 1", v)
	}
	if rules, _ := observeNAT(l.host); !reflect.DeepEqual(sorted(rules), NATRuleIDs(l.spec.External)) {
		t.Fatalf("nft rules = %v, want %v", rules, NATRuleIDs(l.spec.External))
	}

	start := time.Now()
	if err := Teardown(context.Background(), l.h, l.spec); err != nil {
		t.Fatalf("Teardown = %v, want nil", err)
	}
	t.Logf("Teardown: %v", time.Since(start))
	assertTornDown(t, l, fwdBefore)
	if err := Teardown(context.Background(), l.h, l.spec); err != nil {
		t.Fatalf("Teardown(again) = %v, want nil", err)
	}
	assertTornDown(t, l, fwdBefore)
}

func assertTornDown(t *testing.T, l *natLab, fwdBefore string) {
	t.Helper()
	o := connectOVS(t, l.ovs)
	if bridges, err := o.Bridges(context.Background()); err != nil || len(bridges) != 0 {
		t.Fatalf("Bridges() after Teardown = %v, %v, want none", bridges, err)
	}
	if ok, err := linkExists(nlHandle(t, l.host), "br-ex"); err != nil || ok {
		t.Fatalf("br-ex link after Teardown exists = %v, %v, want false", ok, err)
	}
	if rules, err := observeNAT(l.host); err != nil || rules != nil {
		t.Fatalf("nft table after Teardown = %v, %v, want absent", rules, err)
	}
	if v, _ := readIPForward(l.host); v != fwdBefore {
		t.Fatalf("ip_forward after Teardown = %s, want %s", v, fwdBefore)
	}
	if b := l.h.Saved.(*memSaved).b; b != nil {
		t.Fatalf("saved state after Teardown = %s, want none", b)
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// nicSnapshot is what must survive a failed move: addresses with their attributes
// and the routes of the NIC.
func nicSnapshot(t *testing.T, nsPath, name string) (LinkState, []SavedAddr) {
	t.Helper()
	nl := nlHandle(t, nsPath)
	ls, err := observeLink(nl, name)
	if err != nil {
		t.Fatal(err)
	}
	link, err := nl.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := linkAddrs(nl, link)
	if err != nil {
		t.Fatal(err)
	}
	var saved []SavedAddr
	for _, a := range addrs {
		saved = append(saved, toSavedAddr(a))
	}
	return ls, saved
}

// newNICLab is a "host" with a private OVS and a NIC (veth nic0, 192.0.2.1/24, a
// default route and a static route via 192.0.2.2) to an "outside" namespace.
func newNICLab(t *testing.T) *natLab {
	l := &natLab{host: newNetNS(t, "host"), outside: newNetNS(t, "out")}
	l.ovs = startPrivateOVS(t, l.host)
	veth(t, l.host, "nic0", "192.0.2.1/24", l.outside, "eth0", "192.0.2.2/24")
	nl := nlHandle(t, l.host)
	nic, err := nl.LinkByName("nic0")
	if err != nil {
		t.Fatal(err)
	}
	sec, _ := netlink.ParseAddr("192.0.2.3/24")
	if err := nl.AddrAdd(nic, sec); err != nil {
		t.Fatal(err)
	}
	addDefaultRoute(t, l.host, "nic0", "192.0.2.2")
	r, err := fromRoute(Route{Dst: "198.51.100.0/24", Gw: "192.0.2.2", Priority: 50, Protocol: 4}, nic.Attrs().Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := nl.RouteAdd(&r); err != nil {
		t.Fatal(err)
	}
	ext := DefaultExternalNetwork()
	ext.Interface = "nic0"
	l.h = Host{NetNS: l.host, OVSSocket: l.ovs.Socket(), Saved: &memSaved{}, ProbeTimeout: 5 * time.Second}
	l.spec = Spec{Datapath: DatapathNetdev, External: ext}
	return l
}

// TestInterfaceModeRollback: moving a NIC into br-ex with a probe that fails leaves
// the NIC's addresses and routes exactly as they were and no bridge behind.
func TestInterfaceModeRollback(t *testing.T) {
	requireHost(t)
	l := newNICLab(t)
	beforeLink, beforeAddrs := nicSnapshot(t, l.host, "nic0")
	if len(beforeAddrs) != 2 || len(beforeLink.Routes) != 2 {
		t.Fatalf("nic0 before = %v %+v, want 2 addresses and 2 routes", beforeAddrs, beforeLink.Routes)
	}
	var probedGW string
	l.h.Probe = func(ctx context.Context, gw string) error {
		probedGW = gw
		// The move did happen before the probe ran.
		_, addrs := nicSnapshot(t, l.host, "br-ex")
		if len(addrs) != 2 {
			t.Errorf("br-ex addresses during probe = %v, want the 2 moved ones", addrs)
		}
		return context.DeadlineExceeded
	}
	_, err := EnsureExternalNetwork(context.Background(), l.h, l.spec)
	if err == nil || !strings.Contains(err.Error(), "connectivity lost") {
		t.Fatalf("EnsureExternalNetwork(failing probe) = %v, want connectivity lost error", err)
	}
	t.Logf("error: %v", err)
	if probedGW != "192.0.2.2" {
		t.Fatalf("probe gateway = %q, want 192.0.2.2", probedGW)
	}
	afterLink, afterAddrs := nicSnapshot(t, l.host, "nic0")
	if !reflect.DeepEqual(afterAddrs, beforeAddrs) {
		t.Fatalf("nic0 addresses after rollback = %+v, want %+v", afterAddrs, beforeAddrs)
	}
	if !reflect.DeepEqual(afterLink, beforeLink) {
		t.Fatalf("nic0 after rollback = %+v, want %+v", afterLink, beforeLink)
	}
	o := connectOVS(t, l.ovs)
	if bridges, err := o.Bridges(context.Background()); err != nil || len(bridges) != 0 {
		t.Fatalf("Bridges() after rollback = %v, %v, want none", bridges, err)
	}
	if b := l.h.Saved.(*memSaved).b; b != nil {
		t.Fatalf("saved state after rollback = %s, want none", b)
	}
	ping(t, l.host, "192.0.2.2")
}

// TestInterfaceModeSuccess: with the default probe (the old gateway answers a ping
// through br-ex) the move stays, a re-run changes nothing and Teardown restores the NIC.
func TestInterfaceModeSuccess(t *testing.T) {
	requireHost(t)
	l := newNICLab(t)
	beforeLink, beforeAddrs := nicSnapshot(t, l.host, "nic0")
	changed, took := l.ensure(t)
	if !changed {
		t.Fatalf("EnsureExternalNetwork changed = false, want true")
	}
	t.Logf("interface mode EnsureExternalNetwork (with probe): %v", took)
	brLink, _ := nicSnapshot(t, l.host, "br-ex")
	if want := []string{"192.0.2.1/24", "192.0.2.3/24"}; !reflect.DeepEqual(brLink.Addrs, want) {
		t.Fatalf("br-ex addresses = %v, want %v", brLink.Addrs, want)
	}
	if gw := defaultGateway(brLink.Routes); gw != "192.0.2.2" || len(brLink.Routes) != 2 {
		t.Fatalf("br-ex routes = %+v, want default via 192.0.2.2 and 198.51.100.0/24", brLink.Routes)
	}
	if nic, _ := nicSnapshot(t, l.host, "nic0"); len(nic.Addrs) != 0 || len(nic.Routes) != 0 {
		t.Fatalf("nic0 after move = %+v, want no addresses or routes", nic)
	}
	if got := tcpExchange(t, l.outside, "192.0.2.2:5003", l.host, 1<<20); got != "192.0.2.1" {
		t.Fatalf("source seen by outside = %s, want 192.0.2.1", got)
	}
	if changed, _ := l.ensure(t); changed {
		t.Fatalf("EnsureExternalNetwork(again) changed = true, want false")
	}
	if err := Teardown(context.Background(), l.h, l.spec); err != nil {
		t.Fatalf("Teardown = %v, want nil", err)
	}
	afterLink, afterAddrs := nicSnapshot(t, l.host, "nic0")
	if !reflect.DeepEqual(afterAddrs, beforeAddrs) || !reflect.DeepEqual(afterLink, beforeLink) {
		t.Fatalf("nic0 after Teardown = %+v %+v, want %+v %+v", afterLink, afterAddrs, beforeLink, beforeAddrs)
	}
	ping(t, l.host, "192.0.2.2")
}

// TestExternalNetworkAfterVswitchdRestart: a restarted ovs-vswitchd keeps br-ex's tap
// device and address here (ensure is then a no-op) and re-attaches the VM's veth; an
// address lost anyway (flushed by hand) is put back by the next ensure.
func TestExternalNetworkAfterVswitchdRestart(t *testing.T) {
	requireHost(t)
	l := newNATLab(t)
	l.ensure(t)
	vm := l.attachVM(t, "172.24.4.10/24", "172.24.4.1")
	ping(t, vm, "192.0.2.2")
	ctx := context.Background()
	if err := stopDaemon(ctx, l.ovs.pidfile("ovs-vswitchd"), "ovs-vswitchd"); err != nil {
		t.Fatal(err)
	}
	if changed, err := EnsureOVS(ctx, l.ovs); err != nil || !changed {
		t.Fatalf("EnsureOVS(vswitchd stopped) = %v, %v, want true, nil", changed, err)
	}
	if changed, _ := l.ensure(t); changed {
		t.Fatalf("EnsureExternalNetwork after vswitchd restart changed = true, want false")
	}
	waitPortReady(t, connectOVS(t, l.ovs), "vmp")
	ping(t, vm, "192.0.2.2")

	nl := nlHandle(t, l.host)
	br, err := nl.LinkByName("br-ex")
	if err != nil {
		t.Fatal(err)
	}
	gw, _ := netlink.ParseAddr("172.24.4.1/24")
	if err := nl.AddrDel(br, gw); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if changed, _ := l.ensure(t); !changed {
		t.Fatalf("EnsureExternalNetwork after address loss changed = false, want true")
	}
	t.Logf("repair ensure: %v", time.Since(start))
	if got := tcpExchange(t, l.outside, "192.0.2.2:5004", vm, 1<<20); got != "192.0.2.1" {
		t.Fatalf("source seen by outside = %s, want 192.0.2.1", got)
	}
	if changed, _ := l.ensure(t); changed {
		t.Fatalf("EnsureExternalNetwork(again) changed = true, want false")
	}
}

// TestInterfaceModeTeardownWithoutState: with no Saved, Teardown still gives the
// NIC the addresses and routes the bridge carries.
func TestInterfaceModeTeardownWithoutState(t *testing.T) {
	requireHost(t)
	l := newNICLab(t)
	l.h.Saved = nil
	beforeLink, _ := nicSnapshot(t, l.host, "nic0")
	if changed, _ := l.ensure(t); !changed {
		t.Fatalf("EnsureExternalNetwork changed = false, want true")
	}
	if err := Teardown(context.Background(), l.h, l.spec); err != nil {
		t.Fatalf("Teardown = %v, want nil", err)
	}
	afterLink, _ := nicSnapshot(t, l.host, "nic0")
	if !reflect.DeepEqual(afterLink, beforeLink) {
		t.Fatalf("nic0 after Teardown = %+v, want %+v", afterLink, beforeLink)
	}
	ping(t, l.host, "192.0.2.2")
}

// TestExternalNetworkNewBridgeSettles: a bridge created by EnsureExternalNetwork is as
// the plan wants it once vswitchd has settled, every time: vswitchd goes on configuring a
// new bridge's local port after its link appears (the userspace datapath sets
// promiscuous mode from flags it read before), which must not undo "up" (seen as a
// second osd init that changed the host).
func TestExternalNetworkNewBridgeSettles(t *testing.T) {
	requireHost(t)
	l := newNATLab(t)
	for i := 0; i < 8; i++ {
		if changed, _ := l.ensure(t); !changed {
			t.Fatalf("round %d: EnsureExternalNetwork(no bridge) changed = false, want true", i)
		}
		time.Sleep(300 * time.Millisecond)
		if ops := l.plan(t); len(ops) > 0 {
			t.Fatalf("round %d: after EnsureExternalNetwork and 300 ms the plan is %v, want nothing", i, ops)
		}
		if err := Teardown(context.Background(), l.h, l.spec); err != nil {
			t.Fatalf("round %d: Teardown = %v", i, err)
		}
	}
}
