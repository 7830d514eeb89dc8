package netsetup

import (
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// fwLab is a "host" namespace playing an osd node (address 192.168.77.1 on its LAN
// link, gateway 172.24.4.1 of the external network), a "guest" namespace on the external
// network (a router's SNAT address), a "lan" neighbour that routes the pod, service and
// external networks through the host, and a "pod" behind the host's cni0. kube-proxy is
// played by a nat table in the host with DNAT at priority -100: the ClusterIP
// 10.43.0.41:6641 (a control-only port), 10.43.0.44:9696 (open to every member) and
// the NodePorts 30500 (public) and 30501 (internal) to the pod. The host is the control
// node; the LAN neighbour, once made a member, plays a compute node.
type fwLab struct {
	host, guest, lan, pod string
}

func newFirewallLab(t *testing.T) fwLab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces and nftables")
	}
	nft, err := exec.LookPath("nft")
	if err != nil {
		t.Skip("needs nft to play kube-proxy's DNAT")
	}
	l := fwLab{host: newNetNS(t, "fwhost"), guest: newNetNS(t, "fwguest"), lan: newNetNS(t, "fwlan"), pod: newNetNS(t, "fwpod")}
	veth(t, l.host, "gst0", "172.24.4.1/24", l.guest, "eth0", "172.24.4.10/24")
	veth(t, l.host, "lan0", "192.168.77.1/24", l.lan, "eth0", "192.168.77.2/24")
	veth(t, l.host, "cni0", "10.42.0.1/24", l.pod, "eth0", "10.42.0.5/24")
	addDefaultRoute(t, l.guest, "eth0", "172.24.4.1")
	addDefaultRoute(t, l.lan, "eth0", "192.168.77.1") // 10.43.0.0/16, 10.42.0.0/16 and 172.24.4.0/24 via the host
	addDefaultRoute(t, l.pod, "eth0", "10.42.0.1")
	// The host's own connections to ClusterIPs need a route to pick a source (a real host
	// has its default route).
	hnl := nlHandle(t, l.host)
	cni, err := hnl.LinkByName("cni0")
	if err != nil {
		t.Fatal(err)
	}
	_, svc, _ := net.ParseCIDR("10.43.0.0/16")
	if err := hnl.RouteAdd(&netlink.Route{LinkIndex: cni.Attrs().Index, Dst: svc}); err != nil {
		t.Fatal(err)
	}
	if err := writeIPForward(l.host, "1"); err != nil {
		t.Fatal(err)
	}
	// osd's NAT table as on a real host: guests' traffic to the outside is masqueraded.
	if _, err := ensureNAT(l.host, ExternalNetwork{Bridge: "gst0", CIDR: "172.24.4.0/24"}); err != nil {
		t.Fatal(err)
	}
	kubeProxy := `table ip kube {
	chain prerouting {
		type nat hook prerouting priority -100; policy accept;
		ip daddr 10.43.0.41 tcp dport 6641 dnat to 10.42.0.5:6641
		ip daddr 10.43.0.44 tcp dport 9696 dnat to 10.42.0.5:9696
		fib daddr type local tcp dport 30500 dnat to 10.42.0.5:9292
		fib daddr type local tcp dport 30501 dnat to 10.42.0.5:9293
	}
	chain output {
		type nat hook output priority -100; policy accept;
		ip daddr 10.43.0.41 tcp dport 6641 dnat to 10.42.0.5:6641
	}
}
`
	cmd := exec.Command("ip", "netns", "exec", filepath.Base(l.host), nft, "-f", "-")
	cmd.Stdin = strings.NewReader(kubeProxy)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft -f (kube-proxy's DNAT): %v\n%s", err, out)
	}
	listen(t, l.host, "0.0.0.0:6443", "0.0.0.0:8443", "0.0.0.0:2222", "0.0.0.0:5900")
	listen(t, l.pod, "0.0.0.0:6641", "0.0.0.0:9292", "0.0.0.0:9293", "0.0.0.0:9696")
	listen(t, l.lan, "0.0.0.0:8080")
	return l
}

// listen accepts TCP connections on addrs in nsPath (and closes them) until cleanup.
func listen(t *testing.T, nsPath string, addrs ...string) {
	t.Helper()
	for _, a := range addrs {
		var ln net.Listener
		if err := inNetNS(nsPath, func() (err error) { ln, err = net.Listen("tcp4", a); return err }); err != nil {
			t.Fatalf("listen %s in %s: %v", a, filepath.Base(nsPath), err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
}

// reaches says whether a TCP connection from nsPath to addr is answered (accepted or
// refused) within a short timeout: a dropped SYN is not.
func reaches(t *testing.T, nsPath, addr string) bool {
	t.Helper()
	var err error
	if ierr := inNetNS(nsPath, func() error {
		var c net.Conn
		c, err = net.DialTimeout("tcp4", addr, 700*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return nil
	}); ierr != nil {
		t.Fatal(ierr)
	}
	return err == nil || errors.Is(err, syscall.ECONNREFUSED)
}

type fwCheck struct {
	from, to string
	open     bool // with the firewall
}

func (l fwLab) checks() []fwCheck {
	return []fwCheck{
		{l.guest, "10.43.0.41:6641", false},   // OVN NB at its ClusterIP
		{l.guest, "10.42.0.5:6641", false},    // the pod itself
		{l.guest, "172.24.4.1:6443", false},   // k3s API on the gateway
		{l.guest, "192.168.77.1:6443", false}, // k3s API on the node address
		{l.guest, "172.24.4.1:5900", false},   // VNC
		{l.guest, "172.24.4.1:8443", false},   // osd's API
		{l.guest, "172.24.4.1:2222", false},   // the host's own services
		{l.guest, "172.24.4.1:30501", false},  // an internal NodePort
		{l.guest, "172.24.4.1:30500", true},   // Keystone's NodePort
		{l.guest, "192.168.77.1:30500", true}, // Keystone's NodePort on the node address
		{l.guest, "192.168.77.2:8080", true},  // the outside world, through the NAT
		{l.lan, "10.43.0.41:6641", false},     // a neighbour routing the service CIDR via the host
		{l.lan, "10.42.0.5:6641", false},      // and the pod CIDR
		{l.lan, "192.168.77.1:6443", false},   // k3s API
		{l.lan, "172.24.4.1:6443", false},     // k3s API on the gateway address
		{l.lan, "192.168.77.1:5900", false},   // VNC
		{l.lan, "192.168.77.1:30501", false},  // an internal NodePort
		{l.lan, "192.168.77.1:30500", true},   // Keystone's NodePort
		{l.lan, "192.168.77.1:8443", true},    // osd's API: its join routes, the rest needs mTLS
		{l.lan, "192.168.77.1:2222", true},    // the host's own services (SSH) left alone
		{l.pod, "192.168.77.1:6443", true},    // pods reach the host's internals
		{l.pod, "192.168.77.1:5900", true},    // the noVNC proxy reaches VNC
		{l.lan, "10.43.0.44:9696", false},     // a ClusterIP open to members, not to the LAN
		{l.host, "10.43.0.41:6641", true},     // the host itself: nothing of its own output is filtered
	}
}

// TestFirewallNamespaces applies the firewall to a namespace playing an osd host and
// checks, per zone, what reaches what: without the table everything does, with it only
// what FirewallRules says; a member's address added in place opens the internals to it;
// DeleteFirewall opens everything again. The host's own ruleset is not touched.
func TestFirewallNamespaces(t *testing.T) {
	l := newFirewallLab(t)
	name := map[string]string{l.guest: "guest", l.lan: "lan", l.pod: "pod", l.host: "host"}
	for _, c := range l.checks() {
		if !reaches(t, c.from, c.to) {
			t.Fatalf("without the firewall: %s cannot reach %s, want it to (the lab is broken)", name[c.from], c.to)
		}
	}
	spec := FirewallSpec{GuestNets: []string{"172.24.4.0/24"}, PodCIDR: "10.42.0.0/16", ServiceCIDR: "10.43.0.0/16",
		Members: []string{"192.168.77.1"}, PublicTCP: []uint16{30500, 30080},
		InternalTCP: DefaultInternalTCP(), InternalUDP: DefaultInternalUDP(),
		ControlOnlyTCP: DefaultControlOnlyTCP(), ControlSources: []string{"192.168.77.1", "10.42.0.0/24"}}
	changed, err := EnsureFirewall(l.host, spec)
	if err != nil || !changed {
		t.Fatalf("EnsureFirewall = %v, %v, want true, nil", changed, err)
	}
	if t.Failed() {
		return
	}
	for _, c := range l.checks() {
		if got := reaches(t, c.from, c.to); got != c.open {
			t.Errorf("with the firewall: %s reaches %s = %v, want %v", name[c.from], c.to, got, c.open)
		}
	}
	if t.Failed() || testing.Verbose() {
		out, _ := exec.Command("ip", "netns", "exec", filepath.Base(l.host), "nft", "list", "table", "inet", FilterTable).CombinedOutput()
		t.Logf("the host's table:\n%s", out)
	}
	if changed, err := EnsureFirewall(l.host, spec); err != nil || changed {
		t.Errorf("EnsureFirewall again = %v, %v, want false, nil", changed, err)
	}

	// The LAN neighbour becomes a member: its address goes into the set in place.
	withLAN := append(slices.Clone(spec.Members), "192.168.77.2")
	if ok, err := SetFirewallMembers(l.host, withLAN); err != nil || !ok {
		t.Fatalf("SetFirewallMembers(add) = %v, %v, want true, nil", ok, err)
	}
	obs, err := observeFirewall(l.host)
	if err != nil || !slices.Equal(obs.Members, []string{"192.168.77.1", "192.168.77.2"}) {
		t.Errorf("members after the add = %v, %v, want [192.168.77.1 192.168.77.2]", obs.Members, err)
	}
	for _, to := range []string{"192.168.77.1:6443", "10.43.0.44:9696", "10.42.0.5:9696", "192.168.77.1:30501"} {
		if !reaches(t, l.lan, to) {
			t.Errorf("a member cannot reach %s, want it to", to)
		}
	}
	// It is not a control node: the control-only ports stay closed to it, at the
	// ClusterIP, at the pod and on the host.
	for _, to := range []string{"10.43.0.41:6641", "10.42.0.5:6641", "192.168.77.1:5900"} {
		if reaches(t, l.lan, to) {
			t.Errorf("a compute member reaches the control-only %s, want it dropped", to)
		}
	}
	// Made a control node (its address among the control sources), it reaches them.
	ctl := spec
	ctl.Members = withLAN
	ctl.ControlSources = append(slices.Clone(spec.ControlSources), "192.168.77.2")
	if changed, err := EnsureFirewall(l.host, ctl); err != nil || !changed {
		t.Fatalf("EnsureFirewall with another control node = %v, %v, want true, nil", changed, err)
	}
	if !reaches(t, l.lan, "10.43.0.41:6641") {
		t.Error("a control member cannot reach the control-only ClusterIP, want it to")
	}
	// EnsureFirewall with the spec's members takes the extra one out again.
	if changed, err := EnsureFirewall(l.host, spec); err != nil || !changed {
		t.Errorf("EnsureFirewall with fewer members = %v, %v, want true, nil", changed, err)
	}
	if reaches(t, l.lan, "192.168.77.1:6443") {
		t.Error("a removed member still reaches the k3s API")
	}
	if ok, err := SetFirewallMembers(l.host, withLAN); err != nil || !ok {
		t.Fatalf("SetFirewallMembers(add) = %v, %v", ok, err)
	}
	// A member's open connection (a kubelet's watch) ends with its membership.
	conn := echoConn(t, l.host, l.lan, "192.168.77.1:6450")
	if !echoes(conn, "before") {
		t.Fatal("a member's connection to an internal port does not echo")
	}
	if ok, err := SetFirewallMembers(l.host, spec.Members); err != nil || !ok {
		t.Fatalf("SetFirewallMembers(remove) = %v, %v, want true, nil", ok, err)
	}
	if reaches(t, l.lan, "10.43.0.44:9696") {
		t.Error("a removed member still reaches the ClusterIP")
	}
	if echoes(conn, "after") {
		t.Error("a removed member's open connection still goes through, want its tracked connections forgotten")
	}

	if removed, err := DeleteFirewall(l.host); err != nil || !removed {
		t.Fatalf("DeleteFirewall = %v, %v, want true, nil", removed, err)
	}
	if removed, err := DeleteFirewall(l.host); err != nil || removed {
		t.Errorf("DeleteFirewall again = %v, %v, want false, nil", removed, err)
	}
	if ok, err := SetFirewallMembers(l.host, withLAN); err != nil || ok {
		t.Errorf("SetFirewallMembers without the table = %v, %v, want false, nil", ok, err)
	}
	if !reaches(t, l.guest, "10.43.0.41:6641") {
		t.Error("after DeleteFirewall a guest still cannot reach the ClusterIP, want it to (the table is gone)")
	}
}

// echoConn listens on addr in listenNS, echoing what it reads, and returns a connection
// to it from dialNS (closed at cleanup).
func echoConn(t *testing.T, listenNS, dialNS, addr string) net.Conn {
	t.Helper()
	var ln net.Listener
	if err := inNetNS(listenNS, func() (err error) { ln, err = net.Listen("tcp4", addr); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()
	var c net.Conn
	if err := inNetNS(dialNS, func() (err error) { c, err = net.DialTimeout("tcp4", addr, 2*time.Second); return err }); err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// echoes says whether msg sent on c comes back within a second.
func echoes(c net.Conn, msg string) bool {
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		return false
	}
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	return err == nil && string(buf) == msg
}
