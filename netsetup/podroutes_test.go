package netsetup

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"reflect"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// TestSyncPodRoutes applies route sets in a network namespace the test makes: routes are
// added, changed and removed, a route osd did not add is left alone, and a node whose
// address is on no network of this host is reached through the gateway towards it.
func TestSyncPodRoutes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("ip is not installed (test/deps.sh installs iproute2): %v", err)
	}
	name := fmt.Sprintf("osd-podroutes-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "delete", name).Run() })
	ns, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	// A veth pair stands for the node network (this kernel has no dummy links).
	dummy := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "nodes0"}, PeerName: "nodes1"}
	if err := h.LinkAdd(dummy); err != nil {
		t.Fatal(err)
	}
	addr, _ := netlink.ParseAddr("10.99.5.1/24")
	if err := h.AddrAdd(dummy, addr); err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(dummy); err != nil {
		t.Fatal(err)
	}
	// Routes someone else owns: one of them leads to the nodes of another network.
	_, other, _ := net.ParseCIDR("10.50.0.0/16")
	if err := h.RouteAdd(&netlink.Route{Dst: other, Gw: net.ParseIP("10.99.5.9")}); err != nil {
		t.Fatal(err)
	}
	_, remote, _ := net.ParseCIDR("10.77.0.0/16")
	if err := h.RouteAdd(&netlink.Route{Dst: remote, Gw: net.ParseIP("10.99.5.254")}); err != nil {
		t.Fatal(err)
	}
	list := func() map[string]string {
		rs, err := h.RouteList(nil, netlink.FAMILY_V4)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, r := range rs {
			if r.Dst != nil && r.Gw != nil {
				out[r.Dst.String()] = r.Gw.String()
			}
		}
		return out
	}
	steps := []struct {
		want        []PodRoute
		wantChanged int
		wantRoutes  map[string]string
	}{
		{[]PodRoute{{"10.42.1.0/24", "10.99.5.2"}, {"10.42.2.0/24", "10.99.5.3"}}, 2,
			map[string]string{"10.42.1.0/24": "10.99.5.2", "10.42.2.0/24": "10.99.5.3", "10.50.0.0/16": "10.99.5.9", "10.77.0.0/16": "10.99.5.254"}},
		{[]PodRoute{{"10.42.1.0/24", "10.99.5.2"}, {"10.42.2.0/24", "10.99.5.3"}}, 0, nil}, // no-op
		{[]PodRoute{{"10.42.2.0/24", "10.99.5.4"}}, 2, // one moved, one gone
			map[string]string{"10.42.2.0/24": "10.99.5.4", "10.50.0.0/16": "10.99.5.9", "10.77.0.0/16": "10.99.5.254"}},
		// A node at 10.77.0.9, not on this host's networks: through the gateway towards it.
		{[]PodRoute{{"10.42.2.0/24", "10.99.5.4"}, {"10.42.3.0/24", "10.77.0.9"}}, 1,
			map[string]string{"10.42.2.0/24": "10.99.5.4", "10.42.3.0/24": "10.99.5.254", "10.50.0.0/16": "10.99.5.9", "10.77.0.0/16": "10.99.5.254"}},
		{[]PodRoute{{"10.42.2.0/24", "10.99.5.4"}, {"10.42.3.0/24", "10.77.0.9"}}, 0, nil}, // no-op
		{nil, 2, map[string]string{"10.50.0.0/16": "10.99.5.9", "10.77.0.0/16": "10.99.5.254"}},
	}
	for i, s := range steps {
		n, err := syncPodRoutes(h, s.want)
		if err != nil || n != s.wantChanged {
			t.Fatalf("step %d: syncPodRoutes(%v) = %d, %v, want %d changes", i, s.want, n, err, s.wantChanged)
		}
		if s.wantRoutes != nil {
			if got := list(); !reflect.DeepEqual(got, s.wantRoutes) {
				t.Errorf("step %d: routes = %v, want %v", i, got, s.wantRoutes)
			}
		}
	}
}
