package netsetup

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// testFirewallSpec is a two-node cloud's firewall on the control node 192.168.1.10 (pods
// in 10.42.0.0/24), the other member, a compute node, at 192.168.1.11 and 2001:db8::11
// (pods in 10.42.1.0/24), the default external network.
func testFirewallSpec() FirewallSpec {
	return FirewallSpec{
		GuestNets:      []string{"172.24.4.0/24"},
		PodCIDR:        "10.42.0.0/16",
		ServiceCIDR:    "10.43.0.0/16",
		Members:        []string{"192.168.1.10", "192.168.1.11", "2001:db8::11"},
		PublicTCP:      []uint16{30500, 30292, 30778, 30696, 30774, 30680, 30776, 30004, 30000, 30080},
		InternalTCP:    DefaultInternalTCP(),
		InternalUDP:    DefaultInternalUDP(),
		ControlOnlyTCP: DefaultControlOnlyTCP(),
		ControlSources: []string{"192.168.1.10", "10.42.0.0/24", "2001:db8::10"},
	}
}

func TestFirewallRulesVerdicts(t *testing.T) {
	rs, err := FirewallRules(testFirewallSpec())
	if err != nil {
		t.Fatalf("FirewallRules = %v, want nil", err)
	}
	a := netip.MustParseAddr
	var (
		guest  = a("172.24.4.57") // a router's SNAT address
		gw     = a("172.24.4.1")
		self   = a("192.168.1.10")
		member = a("192.168.1.11")
		lan    = a("192.168.1.50")
		lan6   = a("2001:db8::50")
		pod    = a("10.42.0.9")  // a pod of this (control) node
		cpod   = a("10.42.1.7")  // a pod of the compute node
		dbpod  = a("10.42.0.30") // MariaDB's pod here
	)
	tcp := func(src, dst netip.Addr, port uint16, local bool) Packet {
		return Packet{Src: src, Dst: dst, Proto: "tcp", DPort: port, IIF: "eth0", DstLocal: local}
	}
	udp := func(src, dst netip.Addr, port uint16, local bool) Packet {
		p := tcp(src, dst, port, local)
		p.Proto = "udp"
		return p
	}
	with := func(p Packet, f func(*Packet)) Packet { f(&p); return p }
	tests := []struct {
		name    string
		chain   string
		p       Packet
		verdict string
		rule    string
	}{
		{"guest to OVN NB ClusterIP", ChainPrerouting, tcp(guest, a("10.43.0.41"), 6641, false), Drop, "guests to pods and services"},
		{"guest to memcached ClusterIP", ChainPrerouting, tcp(guest, a("10.43.12.7"), 11211, false), Drop, "guests to pods and services"},
		{"guest to a pod", ChainPrerouting, tcp(guest, a("10.42.0.30"), 3306, false), Drop, "guests to pods and services"},
		{"guest to Keystone on the gateway", ChainPrerouting, tcp(guest, gw, 30500, true), Accept, "guests to public ports here"},
		{"guest to Horizon on the node address", ChainPrerouting, tcp(guest, self, 30080, true), Accept, "guests to public ports here"},
		{"guest to VNC on the gateway", ChainPrerouting, tcp(guest, gw, 5900, true), Drop, "guests to this host"},
		{"guest to VNC on the node address", ChainPrerouting, tcp(guest, self, 5903, true), Drop, "guests to this host"},
		{"guest to the k3s API", ChainPrerouting, tcp(guest, gw, 6443, true), Drop, "guests to this host"},
		{"guest to the kubelet", ChainPrerouting, tcp(guest, self, 10250, true), Drop, "guests to this host"},
		{"guest to osd's API", ChainPrerouting, tcp(guest, gw, 8443, true), Drop, "guests to this host"},
		{"guest to the host's SSH", ChainPrerouting, tcp(guest, gw, 22, true), Drop, "guests to this host"},
		{"guest to an internal NodePort", ChainPrerouting, tcp(guest, self, 31234, true), Drop, "guests to this host"},
		{"guest to Geneve", ChainPrerouting, udp(guest, self, 6081, true), Drop, "guests to this host"},
		{"guest pings the gateway", ChainPrerouting, with(tcp(guest, gw, 0, true), func(p *Packet) { p.Proto = "icmp" }), Accept, "guests ping"},
		{"guest to another member's k3s API", ChainPrerouting, tcp(guest, member, 6443, false), Drop, "guests to members"},
		{"guest to another member's Nova API", ChainPrerouting, tcp(guest, member, 30774, false), Accept, "guests to members' public ports"},
		{"guest to the internet", ChainPrerouting, tcp(guest, a("203.0.113.9"), 443, false), Accept, "guests to the outside"},
		{"guest to a LAN host", ChainPrerouting, tcp(guest, lan, 80, false), Accept, "guests to the outside"},
		{"reply to the host's SSH into a guest", ChainPrerouting, with(tcp(guest, gw, 40000, true), func(p *Packet) { p.Established = true }), Accept, "tracked"},
		{"lan to the host's SSH", ChainPrerouting, tcp(lan, self, 22, true), Accept, ""},
		{"lan to osd's API (join routes; the rest needs mTLS)", ChainPrerouting, tcp(lan, self, 8443, true), Accept, ""},
		{"lan to Keystone", ChainPrerouting, tcp(lan, self, 30500, true), Accept, "lan to public ports"},
		{"lan to an internal NodePort", ChainPrerouting, tcp(lan, self, 32000, true), Drop, "lan to internal tcp"},
		{"lan to the k3s API", ChainPrerouting, tcp(lan, self, 6443, true), Drop, "lan to internal tcp"},
		{"lan to the kubelet", ChainPrerouting, tcp(lan, self, 10250, true), Drop, "lan to internal tcp"},
		{"lan to VNC", ChainPrerouting, tcp(lan, self, 6000, true), Drop, "lan to internal tcp"},
		{"lan to a Ceph OSD", ChainPrerouting, tcp(lan, self, 6801, true), Drop, "lan to internal tcp"},
		{"lan to the Ceph mon", ChainPrerouting, tcp(lan, self, 3300, true), Drop, "lan to internal tcp"},
		{"lan to MariaDB on the host", ChainPrerouting, tcp(lan, self, 3306, true), Drop, "lan to internal tcp"},
		{"lan to VNC on the gateway address", ChainPrerouting, tcp(lan, gw, 5901, true), Drop, "lan to internal tcp"},
		{"lan to Geneve", ChainPrerouting, udp(lan, self, 6081, true), Drop, "lan to internal udp"},
		{"lan to an internal UDP NodePort", ChainPrerouting, udp(lan, self, 30053, true), Drop, "lan to internal udp"},
		{"lan to the host's DNS", ChainPrerouting, udp(lan, self, 53, true), Accept, ""},
		{"lan routing to an OVN ClusterIP", ChainPrerouting, tcp(lan, a("10.43.0.42"), 6642, false), Drop, "lan to pods and services"},
		{"lan routing to a pod", ChainPrerouting, tcp(lan, pod, 5672, false), Drop, "lan to pods and services"},
		{"lan over IPv6 to the k3s API", ChainPrerouting, tcp(lan6, a("2001:db8::10"), 6443, true), Drop, "lan to internal tcp"},
		{"lan over IPv6 to SSH", ChainPrerouting, tcp(lan6, a("2001:db8::10"), 22, true), Accept, ""},
		{"lan traffic routed through the host", ChainPrerouting, tcp(lan, a("198.51.100.1"), 6443, false), Accept, ""},
		{"member to the k3s API", ChainPrerouting, tcp(member, self, 6443, true), Accept, "from members (IPv4)"},
		{"member's Geneve", ChainPrerouting, udp(member, self, 6081, true), Accept, "from members (IPv4)"},
		{"member to a ClusterIP", ChainPrerouting, tcp(member, a("10.43.0.44"), 9696, false), Accept, "from members (IPv4)"},
		{"compute node routing to the OVN NB ClusterIP", ChainPrerouting, tcp(member, a("10.43.0.41"), 6641, false), Drop, "other members to control-only ports (IPv4)"},
		{"compute node over IPv6 to the kubelet", ChainPrerouting, tcp(a("2001:db8::11"), a("2001:db8::10"), 10250, true), Drop, "other members to control-only ports (IPv6)"},
		{"control node over IPv6 to the kubelet", ChainPrerouting, tcp(a("2001:db8::10"), a("2001:db8::10"), 10250, true), Accept, "control nodes to control-only ports (IPv6)"},
		{"pod to the kubelet", ChainPrerouting, tcp(pod, self, 10250, true), Accept, "control nodes to control-only ports (IPv4)"},
		{"pod to VNC (the noVNC proxy)", ChainPrerouting, tcp(pod, self, 5900, true), Accept, "control nodes to control-only ports (IPv4)"},
		{"pod to MariaDB", ChainPrerouting, tcp(pod, dbpod, 3306, false), Accept, "control nodes to control-only ports (IPv4)"},
		{"pod to a ClusterIP's API", ChainPrerouting, tcp(pod, a("10.43.0.44"), 9696, false), Accept, "from pods and services"},
		{"compute pod to MariaDB's pod", ChainPrerouting, tcp(cpod, dbpod, 3306, false), Drop, "other pods to control-only ports"},
		{"compute pod to memcached's pod", ChainPrerouting, tcp(cpod, a("10.42.0.31"), 11211, false), Drop, "other pods to control-only ports"},
		{"compute pod to the OVN NB pod", ChainPrerouting, tcp(cpod, a("10.42.0.32"), 6641, false), Drop, "other pods to control-only ports"},
		{"compute pod to the unrestricted OVN SB port", ChainPrerouting, tcp(cpod, a("10.42.0.33"), 16642, false), Drop, "other pods to control-only ports"},
		{"compute pod to the OVN SB RBAC port", ChainPrerouting, tcp(cpod, a("10.42.0.33"), 6642, false), Accept, "from pods and services"},
		{"compute pod to RabbitMQ", ChainPrerouting, tcp(cpod, a("10.42.0.34"), 5672, false), Accept, "from pods and services"},
		{"compute pod to RabbitMQ's management", ChainPrerouting, tcp(cpod, a("10.42.0.34"), 15672, false), Drop, "other pods to control-only ports"},
		{"compute pod to CoreDNS", ChainPrerouting, udp(cpod, a("10.42.0.35"), 53, false), Accept, "from pods and services"},
		{"compute node to the OVN NB pod", ChainPrerouting, tcp(member, a("10.42.0.32"), 6641, false), Drop, "other members to control-only ports (IPv4)"},
		{"compute node to a VNC console here", ChainPrerouting, tcp(member, self, 5901, true), Drop, "other members to control-only ports (IPv4)"},
		{"compute node to the k3s API", ChainPrerouting, tcp(member, self, 6443, true), Accept, "from members (IPv4)"},
		{"compute node to osd's API", ChainPrerouting, tcp(member, self, 8443, true), Accept, "from members (IPv4)"},
		{"compute node to the Ceph mon", ChainPrerouting, tcp(member, self, 3300, true), Accept, "from members (IPv4)"},
		{"compute node to a Ceph OSD", ChainPrerouting, tcp(member, self, 6801, true), Accept, "from members (IPv4)"},
		{"guest to a MySQL server on the internet", ChainPrerouting, tcp(guest, a("203.0.113.9"), 3306, false), Accept, "guests to the outside"},
		{"lan traffic to MySQL routed through the host", ChainPrerouting, tcp(lan, a("198.51.100.1"), 3306, false), Accept, ""},
		{"forward: a compute pod to MariaDB's pod", ChainForward, tcp(cpod, dbpod, 3306, false), Drop, "other pods to control-only ports"},
		{"forward: a pod to MariaDB's pod", ChainForward, tcp(pod, dbpod, 3306, false), Accept, "control nodes to control-only ports (IPv4)"},
		{"the host to itself", ChainPrerouting, with(tcp(self, self, 6443, true), func(p *Packet) { p.IIF = "lo" }), Accept, "loopback"},
		{"forward: a guest's Keystone NodePort to its pod", ChainForward, with(tcp(guest, a("10.42.0.31"), 5000, false), func(p *Packet) { p.DNAT = true }), Accept, "dnat judged in prerouting"},
		{"forward: a guest to a pod, not DNATed", ChainForward, tcp(guest, a("10.42.0.31"), 5000, false), Drop, "untrusted to pods and services"},
		{"forward: lan to a ClusterIP", ChainForward, tcp(lan, a("10.43.0.41"), 6641, false), Drop, "untrusted to pods and services"},
		{"forward: a guest to the internet", ChainForward, tcp(guest, a("203.0.113.9"), 443, false), Accept, ""},
		{"forward: a pod to the internet", ChainForward, tcp(pod, a("203.0.113.9"), 443, false), Accept, "from pods and services"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, rule := rs.Evaluate(tt.chain, tt.p)
			if v != tt.verdict || rule != tt.rule {
				t.Errorf("Evaluate(%s, %+v) = %s by %q, want %s by %q", tt.chain, tt.p, v, rule, tt.verdict, tt.rule)
			}
		})
	}
}

func TestFirewallRulesInvalid(t *testing.T) {
	tests := []struct {
		name string
		edit func(*FirewallSpec)
		want string
	}{
		{"guest network not a CIDR", func(s *FirewallSpec) { s.GuestNets = []string{"172.24.4.1"} }, "guest networks"},
		{"IPv6 guest network", func(s *FirewallSpec) { s.GuestNets = []string{"2001:db8::/64"} }, "guest networks"},
		{"no pod CIDR", func(s *FirewallSpec) { s.PodCIDR = "" }, "pod and service"},
		{"member not an address", func(s *FirewallSpec) { s.Members = []string{"node-a:8443"} }, "member address"},
		{"member with a zone", func(s *FirewallSpec) { s.Members = []string{"fe80::1%eth0"} }, "member address"},
		{"control source not an address", func(s *FirewallSpec) { s.ControlSources = []string{"node-a"} }, "control sources"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testFirewallSpec()
			tt.edit(&s)
			if _, err := FirewallRules(s); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("FirewallRules = %v, want an error about %q", err, tt.want)
			}
		})
	}
}

func TestFirewallSets(t *testing.T) {
	s := testFirewallSpec()
	s.GuestNets = []string{"172.24.4.7/24", "172.24.4.0/25", "198.51.100.0/24"}
	s.Members = []string{"192.168.1.11", "::ffff:192.168.1.11", "192.168.1.10"}
	// Overlaps merged, mapped addresses unmapped, a guest's address never a control node's.
	s.ControlSources = []string{"192.168.1.10", "10.42.0.5", "10.42.0.0/24", "172.24.4.9", "::ffff:192.168.1.10", "2001:db8::10"}
	rs, err := FirewallRules(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ set, want string }{
		{GuestSet4, "set guest4 ipv4_addr {172.24.4.0/24,198.51.100.0/24}"},
		{ClusterSet4, "set cluster4 ipv4_addr {10.42.0.0/16,10.43.0.0/16}"},
		{MembersSet4, "set members4 ipv4_addr {192.168.1.10/32,192.168.1.11/32}"},
		{MembersSet6, "set members6 ipv6_addr {}"},
		{PublicTCPSet, "set public_tcp inet_service {30000,30004,30080,30292,30500,30680,30696,30774,30776,30778}"},
		{InternalUDP, "set internal_udp inet_service {4789,6081,8472,30000-32767}"},
		{ControlTCP, "set control_tcp inet_service {2379-2381,3306,4369,5900-6442,6641,6643-6644,10248-10260,11211,15672,16642,25672}"},
		{ControlSet4, "set control4 ipv4_addr {10.42.0.0/24,192.168.1.10/32}"},
		{ControlSet6, "set control6 ipv6_addr {2001:db8::10/128}"},
		{InternalTCP, "set internal_tcp inet_service {2379-2381,3300,3306,4369,5672,5900-7300,10248-10260,11211,15672,16509,16514,16642,25672,30000-32767}"},
	} {
		got, ok := rs.Set(tt.set)
		if !ok || got.String() != tt.want {
			t.Errorf("Set(%s) = %q, want %q", tt.set, got, tt.want)
		}
	}
}

func TestFirewallDigest(t *testing.T) {
	base, _ := FirewallRules(testFirewallSpec())
	s := testFirewallSpec()
	s.Members = []string{"192.168.1.10"}
	fewer, _ := FirewallRules(s)
	if base.Digest() != fewer.Digest() {
		t.Errorf("Digest with other members = %s, want %s (members change in place)", fewer.Digest(), base.Digest())
	}
	s = testFirewallSpec()
	s.PublicTCP = append(s.PublicTCP, 30443)
	more, _ := FirewallRules(s)
	if base.Digest() == more.Digest() {
		t.Errorf("Digest with another public port = %s, want a new digest", more.Digest())
	}
	ids := base.RuleIDs()
	if len(ids) == 0 || !strings.HasPrefix(ids[0], "osd "+base.Digest()+" prerouting: ") {
		t.Errorf("RuleIDs()[0] = %q, want it to carry the digest", ids)
	}
	for _, id := range ids {
		if len(id) > 255 {
			t.Errorf("rule identity %q is %d bytes, want at most 255 (the kernel's user data limit)", id, len(id))
		}
	}
}

func TestMergePorts(t *testing.T) {
	tests := []struct {
		in, want []PortRange
	}{
		{nil, nil},
		{[]PortRange{{10, 20}, {15, 30}, {31, 31}, {40, 40}}, []PortRange{{10, 31}, {40, 40}}},
		{[]PortRange{{7300, 6800}, {5900, 6923}}, []PortRange{{5900, 7300}}},
		{[]PortRange{{65535, 65535}, {0, 0}}, []PortRange{{0, 0}, {65535, 65535}}},
	}
	for _, tt := range tests {
		if got := MergePorts(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("MergePorts(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestPrefixEnd(t *testing.T) {
	tests := []struct {
		p    string
		want string
		ok   bool
	}{
		{"10.42.0.0/16", "10.43.0.0", true},
		{"172.24.4.0/24", "172.24.5.0", true},
		{"192.168.1.10/32", "192.168.1.11", true},
		{"255.255.255.0/24", "", false},
		{"2001:db8::/64", "2001:db8:0:1::", true},
	}
	for _, tt := range tests {
		got, ok := prefixEnd(netip.MustParsePrefix(tt.p))
		if ok != tt.ok || (ok && got.String() != tt.want) {
			t.Errorf("prefixEnd(%s) = %v, %v, want %s, %v", tt.p, got, ok, tt.want, tt.ok)
		}
	}
}

// TestTrustedMembers: a member address inside a guest network or the pod or service CIDR
// is never trusted (it would open the host to guests); others are kept as given.
func TestTrustedMembers(t *testing.T) {
	spec := FirewallSpec{GuestNets: []string{"172.24.4.0/24"}, PodCIDR: "10.42.0.0/16", ServiceCIDR: "10.43.0.0/16",
		Members: []string{"192.0.2.2", "172.24.4.150", "10.42.0.7", "10.43.0.41", "2001:db8::2", "::ffff:172.24.4.9", "198.51.100.7"}}
	want := []string{"192.0.2.2", "2001:db8::2", "198.51.100.7"}
	if got := TrustedMembers(spec); !slices.Equal(got, want) {
		t.Errorf("TrustedMembers() = %v, want %v", got, want)
	}
	rs, err := FirewallRules(spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rs.Sets {
		if s.Name == MembersSet4 {
			for _, p := range s.Prefixes {
				if p.Addr().String() == "172.24.4.150" {
					t.Errorf("FirewallRules() members4 holds the guest address 172.24.4.150")
				}
			}
		}
	}
}
