package netsetup

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/osdcloud/osd/netsetup/ovsdb"
	"github.com/vishvananda/netlink"
)

// tunnelNode is one side of TestTunnelBridgeGeneve: a network namespace with its own
// Open vSwitch on the userspace datapath and the end of the link to the other side.
type tunnelNode struct {
	ns  string
	ovs OVSConfig
	h   Host
}

func (n tunnelNode) vsctl(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ovs-vsctl", append([]string{"--db=unix:" + n.ovs.Socket(), "--timeout=10"}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("ovs-vsctl %v: %v\n%s", args, err, out)
	}
}

// overlay gives the node an integration bridge with a Geneve port to remote and an
// internal port "vm" with addr, the way OVN plugs a guest into br-int. The kernel computes
// the checksums of what "vm" sends (no transmit checksum offload): Open vSwitch 3.1's
// userspace datapath drops a packet whose checksum is left to offload when it is to be
// tunnelled ("Tunneling packets with HW offload flags is not supported"), which is every
// TCP packet of a port with offload, as internal ports have while userspace-tso-enable is
// on. Ping is unaffected (ICMP checksums are computed in software).
func (n tunnelNode) overlay(t *testing.T, remote, addr string) {
	t.Helper()
	n.vsctl(t, "add-br", "br-int", "--", "set", "bridge", "br-int", "datapath_type=netdev",
		"--", "add-port", "br-int", "gnv0", "--", "set", "interface", "gnv0", "type=geneve", "options:remote_ip="+remote,
		"--", "add-port", "br-int", "vm", "--", "set", "interface", "vm", "type=internal")
	nl := nlHandle(t, n.ns)
	var vm netlink.Link
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if vm, err = nl.LinkByName("vm"); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("internal port vm: %v", err)
	}
	a, _ := netlink.ParseAddr(addr)
	if err := nl.LinkSetMTU(vm, 1400); err != nil {
		t.Fatal(err)
	}
	if err := nl.AddrAdd(vm, a); err != nil {
		t.Fatal(err)
	}
	if err := nl.LinkSetUp(vm); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("nsenter", "--net="+n.ns, "ethtool", "-K", "vm", "tx", "off").CombinedOutput(); err != nil {
		t.Fatalf("ethtool -K vm tx off (test/deps.sh installs ethtool): %v\n%s", err, out)
	}
}

// TestTunnelBridgeGeneve: two nodes on the userspace datapath, linked by a veth pair,
// each with its tunnel endpoint moved into br-phy by EnsureTunnelBridge, carry traffic
// over Geneve between their integration bridges (ping both ways, and TCP), which they do
// not without the bridge, and TCP between the nodes' own addresses on the bridges;
// RemoveTunnelBridge gives the link its address back.
func TestTunnelBridgeGeneve(t *testing.T) {
	requireHost(t)
	ctx := context.Background()
	a := tunnelNode{ns: newNetNS(t, "tuna")}
	b := tunnelNode{ns: newNetNS(t, "tunb")}
	veth(t, a.ns, "tunl-a", "10.97.0.1/24", b.ns, "tunl-b", "10.97.0.2/24")
	for _, n := range []*tunnelNode{&a, &b} {
		n.ovs = startPrivateOVS(t, n.ns)
		n.h = Host{NetNS: n.ns, OVSSocket: n.ovs.Socket(), Saved: &memSaved{}, ProbeTimeout: 5 * time.Second}
	}
	a.overlay(t, "10.97.0.2", "192.168.97.1/24")
	b.overlay(t, "10.97.0.1", "192.168.97.2/24")
	pingCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	err := Ping(pingCtx, a.ns, "192.168.97.2")
	cancel()
	if err == nil {
		t.Fatal("Geneve between userspace datapaths carried a ping without the tunnel bridge: the test proves nothing")
	}
	t.Logf("without the tunnel bridge: %v", err)
	for _, c := range []struct {
		n     tunnelNode
		iface string
		addr  string
	}{{a, "tunl-a", "10.97.0.1"}, {b, "tunl-b", "10.97.0.2"}} {
		changed, err := EnsureTunnelBridge(ctx, c.n.h, c.iface)
		if err != nil || !changed {
			t.Fatalf("EnsureTunnelBridge(%s) = %v, %v, want changed", c.iface, changed, err)
		}
		if got, err := LinkIPv4(c.n.ns, TunnelBridge); got != c.addr {
			t.Fatalf("%s address after the move = %q, %v, want %s", TunnelBridge, got, err, c.addr)
		}
		if got, _ := LinkOf(c.n.ns, c.addr); got != TunnelBridge {
			t.Errorf("LinkOf(%s) = %q, want %s", c.addr, got, TunnelBridge)
		}
		if changed, err := EnsureTunnelBridge(ctx, c.n.h, c.iface); err != nil || changed {
			t.Errorf("EnsureTunnelBridge(%s) again = %v, %v, want no change", c.iface, changed, err)
		}
	}
	ping(t, a.ns, "192.168.97.2")
	ping(t, b.ns, "192.168.97.1")
	tcpExchange(t, b.ns, "192.168.97.2:5097", a.ns, 64<<10)
	// The nodes' own traffic (the Kubernetes API, the join, pod routes) goes through br-phy
	// now, from kernel sockets with checksum offload: not tunnelled, so it crosses.
	tcpExchange(t, b.ns, "10.97.0.2:5098", a.ns, 64<<10)
	out, _ := exec.Command("ovs-appctl", "--target="+a.ovs.RunDir+"/ovs-vswitchd."+vswitchdPID(t, a.ovs)+".ctl", "tnl/neigh/show").CombinedOutput()
	t.Logf("node a's tunnel neighbours:\n%s", out)
	if removed, err := RemoveTunnelBridge(ctx, a.h, "tunl-a"); err != nil || !removed {
		t.Fatalf("RemoveTunnelBridge = %v, %v, want removed", removed, err)
	}
	if got, err := LinkIPv4(a.ns, "tunl-a"); got != "10.97.0.1" {
		t.Errorf("tunl-a after RemoveTunnelBridge = %q, %v, want 10.97.0.1 back", got, err)
	}
	bridges, _ := connectOVS(t, a.ovs).Bridges(ctx)
	if slices.ContainsFunc(bridges, func(br ovsdb.BridgeInfo) bool { return br.Name == TunnelBridge }) {
		t.Errorf("bridges after RemoveTunnelBridge = %+v, want no %s", bridges, TunnelBridge)
	}
	ping(t, a.ns, "10.97.0.2")
}

// vswitchdPID is the pid of the node's ovs-vswitchd, for its control socket's name.
func vswitchdPID(t *testing.T, c OVSConfig) string {
	t.Helper()
	return fmt.Sprint(daemonPID(c.pidfile("ovs-vswitchd"), "ovs-vswitchd"))
}
