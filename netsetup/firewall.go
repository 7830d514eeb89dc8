package netsetup

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// FilterTable is the name of osd's host firewall table (family inet: IPv4 and IPv6),
// beside the NAT table (NATTable).
const FilterTable = "osd-filter"

// The firewall's named sets. MembersSet4 and MembersSet6 change while the firewall is in
// place (SetFirewallMembers); the others are fixed by FirewallSpec.
const (
	GuestSet4    = "guest4"       // where guests' traffic comes from: the external networks
	ClusterSet4  = "cluster4"     // the pod and service CIDRs
	MembersSet4  = "members4"     // the cluster members' IPv4 addresses
	MembersSet6  = "members6"     // the cluster members' IPv6 addresses
	PublicTCPSet = "public_tcp"   // the public endpoints' ports
	InternalTCP  = "internal_tcp" // osd's internal TCP ports on this host
	InternalUDP  = "internal_udp" // osd's internal UDP ports on this host
	ControlTCP   = "control_tcp"  // the ports only control nodes and their pods may reach
	ControlSet4  = "control4"     // the control nodes' IPv4 addresses and pod CIDRs
	ControlSet6  = "control6"     // the control nodes' IPv6 addresses
)

// The firewall's base chains (both type filter, policy accept). Prerouting runs at
// priority FirewallPriority, after conntrack (-200) and before kube-proxy's and the CNI's
// DNAT (-100), so it judges every packet by the destination it was sent to: a
// ClusterIP, a NodePort or a host socket alike.
const (
	ChainPrerouting  = "prerouting"
	ChainForward     = "forward"
	FirewallPriority = -150
)

// PortRange is an inclusive range of ports.
type PortRange struct{ First, Last uint16 }

func (r PortRange) String() string {
	if r.First == r.Last {
		return fmt.Sprint(r.First)
	}
	return fmt.Sprintf("%d-%d", r.First, r.Last)
}

// Ports returns single-port ranges.
func Ports(ps ...uint16) []PortRange {
	out := make([]PortRange, len(ps))
	for i, p := range ps {
		out[i] = PortRange{p, p}
	}
	return out
}

// FirewallSpec are the zones of the host firewall. Trusted: loopback, the pod and service
// CIDRs, the members. Guests: sources in GuestNets. The LAN: every other source.
type FirewallSpec struct {
	GuestNets   []string    // IPv4 CIDRs of every external (floating-IP) network
	PodCIDR     string      // IPv4 CIDR of the pods
	ServiceCIDR string      // IPv4 CIDR of the ClusterIPs
	Members     []string    // the cluster members' addresses (IPv4 or IPv6), this host's included
	PublicTCP   []uint16    // the public endpoints' ports (NodePorts), open to everyone
	InternalTCP []PortRange // osd's internal TCP ports on this host, closed but to trusted sources
	InternalUDP []PortRange // osd's internal UDP ports on this host, closed but to trusted sources
	// ControlOnlyTCP are the TCP ports (as the listener sees them: pod ports and host
	// sockets) that only ControlSources reach, whatever the other trusted sources: what a
	// compute node needs none of (the databases, the OVN northbound database and the
	// southbound one's unrestricted port, memcached, the kubelet, the guests' consoles).
	ControlOnlyTCP []PortRange
	// ControlSources are the control nodes' addresses and pod CIDRs (IP addresses or
	// CIDRs, IPv4 or IPv6), this host's when it is one.
	ControlSources []string
}

// NodePortRange is Kubernetes' NodePort range: every NodePort but the public ones is
// internal.
var NodePortRange = PortRange{30000, 32767}

// DefaultInternalTCP are the TCP ports of osd's internals that listen on the host or are
// NodePorts: MariaDB, RabbitMQ (AMQP, management, clustering, epmd), memcached, the OVN
// databases (and their raft ports, and the southbound port of Neutron and osd, 16642), Ceph (mon v2/v1, OSDs and mgr), k3s (API and
// supervisor, etcd when embedded), the kubelet and the control plane's local ports,
// libvirt's TCP listeners, QEMU's VNC servers, and every NodePort.
func DefaultInternalTCP() []PortRange {
	return []PortRange{{2379, 2381}, {3300, 3300}, {3306, 3306}, {4369, 4369}, {5672, 5672},
		{5900, 6923}, {6443, 6443}, {6641, 6644}, {6789, 6789}, {6800, 7300}, {10248, 10260},
		{11211, 11211}, {15672, 15672}, {16509, 16509}, {16514, 16514}, {16642, 16642}, {25672, 25672}, NodePortRange}
}

// DefaultControlOnlyTCP are the internal TCP ports only control nodes and their pods
// reach: MariaDB, RabbitMQ's clustering and management ports (not AMQP: nova-compute
// speaks it), memcached, the OVN northbound database and the raft ports, the southbound
// database's unrestricted port (16642: chassis use 6642, under RBAC), the datastore, the
// kubelet and the control plane's local ports, and QEMU's VNC servers below the
// Kubernetes API's port (displays 0-542 of a host; the noVNC proxy runs on a control node). The Kubernetes API, osd's API, Ceph,
// libvirt, 6642 and AMQP stay open to every member.
func DefaultControlOnlyTCP() []PortRange {
	return []PortRange{{2379, 2381}, {3306, 3306}, {4369, 4369}, {5900, 6442}, {6641, 6641}, {6643, 6644},
		{10248, 10260}, {11211, 11211}, {15672, 15672}, {16642, 16642}, {25672, 25672}}
}

// DefaultInternalUDP are the UDP ports of osd's internals: Geneve (6081), VXLAN (4789,
// 8472) and every NodePort.
func DefaultInternalUDP() []PortRange {
	return []PortRange{{4789, 4789}, {6081, 6081}, {8472, 8472}, NodePortRange}
}

// SetKind is what a named set holds.
type SetKind string

// The kinds of set.
const (
	SetAddr4 SetKind = "ipv4_addr"
	SetAddr6 SetKind = "ipv6_addr"
	SetPort  SetKind = "inet_service"
)

// FirewallSet is one named set of the table.
type FirewallSet struct {
	Name     string
	Kind     SetKind
	Interval bool           // holds prefixes or ranges; else single elements
	Prefixes []netip.Prefix // address sets
	Ports    []PortRange    // port sets
}

func (s FirewallSet) String() string {
	var el []string
	for _, p := range s.Prefixes {
		el = append(el, p.String())
	}
	for _, p := range s.Ports {
		el = append(el, p.String())
	}
	return fmt.Sprintf("set %s %s {%s}", s.Name, s.Kind, strings.Join(el, ","))
}

// CondKind is one kind of match.
type CondKind string

// The kinds of match a rule has.
const (
	CondEstablished CondKind = "ct state established,related"
	CondDNAT        CondKind = "ct status dnat"
	CondIIF         CondKind = "iifname" // Arg: the interface
	CondSrcIn       CondKind = "saddr"   // Arg: an address set
	CondDstIn       CondKind = "daddr"   // Arg: an address set
	CondDstLocal    CondKind = "fib daddr type local"
	CondProto       CondKind = "l4proto"  // Arg: tcp, udp or icmp
	CondDPortIn     CondKind = "th dport" // Arg: a port set (after CondProto tcp or udp)
)

// Cond is one match of a rule.
type Cond struct {
	Kind CondKind
	Arg  string
}

func (c Cond) String() string {
	switch c.Kind {
	case CondSrcIn, CondDstIn, CondDPortIn:
		return string(c.Kind) + " @" + c.Arg
	case CondIIF, CondProto:
		return string(c.Kind) + " " + c.Arg
	}
	return string(c.Kind)
}

// Verdicts.
const (
	Accept = "accept"
	Drop   = "drop"
)

// FirewallRule is one rule: when every Cond matches, Verdict.
type FirewallRule struct {
	Name    string // what it is for, short
	Conds   []Cond
	Verdict string
}

func (r FirewallRule) String() string {
	cs := make([]string, len(r.Conds))
	for i, c := range r.Conds {
		cs[i] = c.String()
	}
	return strings.Join(append(cs, r.Verdict), " ")
}

// FirewallChain is one base chain.
type FirewallChain struct {
	Name  string // ChainPrerouting or ChainForward
	Rules []FirewallRule
}

// Ruleset is the whole table.
type Ruleset struct {
	Sets   []FirewallSet
	Chains []FirewallChain
}

// Set returns the named set.
func (rs Ruleset) Set(name string) (FirewallSet, bool) {
	for _, s := range rs.Sets {
		if s.Name == name {
			return s, true
		}
	}
	return FirewallSet{}, false
}

// Digest identifies everything of rs but the members' sets (which change in place): its
// rules carry it, so that observing the table tells whether it is rs.
func (rs Ruleset) Digest() string {
	h := sha256.New()
	for _, s := range rs.Sets {
		if s.Name == MembersSet4 || s.Name == MembersSet6 {
			fmt.Fprintf(h, "set %s %s\n", s.Name, s.Kind)
			continue
		}
		fmt.Fprintln(h, s.String())
	}
	for _, c := range rs.Chains {
		for _, r := range c.Rules {
			fmt.Fprintf(h, "%s: %s\n", c.Name, r)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// RuleIDs are the identities (user data) of rs's rules in the kernel, in chain order.
func (rs Ruleset) RuleIDs() []string {
	d := rs.Digest()
	var ids []string
	for _, c := range rs.Chains {
		for _, r := range c.Rules {
			ids = append(ids, ruleID(d, c.Name, r))
		}
	}
	return ids
}

func ruleID(digest, chain string, r FirewallRule) string {
	return "osd " + digest + " " + chain + ": " + r.Name
}

// FirewallRules is the host firewall for spec (pure). Prerouting, in order:
//
//   - replies and related packets of tracked connections pass;
//   - the control-only ports (ControlOnlyTCP) are reached from ControlSources only: a
//     compute node and its pods, trusted otherwise, reach none (guests and the LAN are
//     judged by their own rules below);
//   - trusted sources pass: loopback, pods and services, the members;
//   - guests may not reach pods or ClusterIPs; they may ping; on this host and on the
//     members they reach only the public ports; everything else of theirs (routed to the
//     outside world through the host's NAT) passes;
//   - any other source (the LAN) may not reach pods or ClusterIPs (a neighbour routing the
//     service CIDR through the host); on this host the public ports are open and osd's
//     internal ports closed; the host's own other services (SSH) are left alone.
//
// Forward repeats the guard on pods and ClusterIPs for what was not DNATed in prerouting
// (a DNATed packet was judged there by the address it was sent to).
func FirewallRules(spec FirewallSpec) (Ruleset, error) {
	guests, err := prefixes4(spec.GuestNets)
	if err != nil {
		return Ruleset{}, fmt.Errorf("guest networks: %w", err)
	}
	cluster, err := prefixes4([]string{spec.PodCIDR, spec.ServiceCIDR})
	if err != nil {
		return Ruleset{}, fmt.Errorf("pod and service CIDRs: %w", err)
	}
	m4, m6, err := memberSets(TrustedMembers(spec))
	if err != nil {
		return Ruleset{}, err
	}
	c4, c6, err := sourceSets(spec.ControlSources)
	if err != nil {
		return Ruleset{}, fmt.Errorf("control sources: %w", err)
	}
	// A guest network is never a control node's (as with TrustedMembers).
	c4 = slices.DeleteFunc(c4, func(p netip.Prefix) bool {
		return slices.ContainsFunc(guests, func(g netip.Prefix) bool { return g.Overlaps(p) })
	})
	rs := Ruleset{Sets: []FirewallSet{
		{Name: GuestSet4, Kind: SetAddr4, Interval: true, Prefixes: guests},
		{Name: ClusterSet4, Kind: SetAddr4, Interval: true, Prefixes: cluster},
		{Name: MembersSet4, Kind: SetAddr4, Prefixes: m4},
		{Name: MembersSet6, Kind: SetAddr6, Prefixes: m6},
		{Name: PublicTCPSet, Kind: SetPort, Ports: MergePorts(Ports(spec.PublicTCP...))},
		{Name: InternalTCP, Kind: SetPort, Interval: true, Ports: MergePorts(spec.InternalTCP)},
		{Name: InternalUDP, Kind: SetPort, Interval: true, Ports: MergePorts(spec.InternalUDP)},
		{Name: ControlTCP, Kind: SetPort, Interval: true, Ports: MergePorts(spec.ControlOnlyTCP)},
		{Name: ControlSet4, Kind: SetAddr4, Interval: true, Prefixes: c4},
		{Name: ControlSet6, Kind: SetAddr6, Interval: true, Prefixes: c6},
	}}
	var (
		est       = Cond{Kind: CondEstablished}
		fromGuest = Cond{Kind: CondSrcIn, Arg: GuestSet4}
		toCluster = Cond{Kind: CondDstIn, Arg: ClusterSet4}
		toMember  = Cond{Kind: CondDstIn, Arg: MembersSet4}
		local     = Cond{Kind: CondDstLocal}
		tcp       = Cond{Kind: CondProto, Arg: "tcp"}
		udp       = Cond{Kind: CondProto, Arg: "udp"}
		public    = Cond{Kind: CondDPortIn, Arg: PublicTCPSet}
	)
	trusted := []FirewallRule{
		{Name: "from pods and services", Conds: []Cond{{Kind: CondSrcIn, Arg: ClusterSet4}}, Verdict: Accept},
		{Name: "from members (IPv4)", Conds: []Cond{{Kind: CondSrcIn, Arg: MembersSet4}}, Verdict: Accept},
		{Name: "from members (IPv6)", Conds: []Cond{{Kind: CondSrcIn, Arg: MembersSet6}}, Verdict: Accept},
	}
	controlPort := Cond{Kind: CondDPortIn, Arg: ControlTCP}
	controlOnly := []FirewallRule{
		{Name: "control nodes to control-only ports (IPv4)", Conds: []Cond{tcp, controlPort, {Kind: CondSrcIn, Arg: ControlSet4}}, Verdict: Accept},
		{Name: "control nodes to control-only ports (IPv6)", Conds: []Cond{tcp, controlPort, {Kind: CondSrcIn, Arg: ControlSet6}}, Verdict: Accept},
		{Name: "other pods to control-only ports", Conds: []Cond{tcp, controlPort, {Kind: CondSrcIn, Arg: ClusterSet4}}, Verdict: Drop},
		{Name: "other members to control-only ports (IPv4)", Conds: []Cond{tcp, controlPort, {Kind: CondSrcIn, Arg: MembersSet4}}, Verdict: Drop},
		{Name: "other members to control-only ports (IPv6)", Conds: []Cond{tcp, controlPort, {Kind: CondSrcIn, Arg: MembersSet6}}, Verdict: Drop},
	}
	pre := []FirewallRule{
		{Name: "tracked", Conds: []Cond{est}, Verdict: Accept},
		{Name: "loopback", Conds: []Cond{{Kind: CondIIF, Arg: "lo"}}, Verdict: Accept},
	}
	pre = append(pre, controlOnly...)
	pre = append(pre, trusted...)
	pre = append(pre,
		FirewallRule{Name: "guests to pods and services", Conds: []Cond{fromGuest, toCluster}, Verdict: Drop},
		FirewallRule{Name: "guests ping", Conds: []Cond{fromGuest, {Kind: CondProto, Arg: "icmp"}}, Verdict: Accept},
		FirewallRule{Name: "guests to public ports here", Conds: []Cond{fromGuest, local, tcp, public}, Verdict: Accept},
		FirewallRule{Name: "guests to this host", Conds: []Cond{fromGuest, local}, Verdict: Drop},
		FirewallRule{Name: "guests to members' public ports", Conds: []Cond{fromGuest, toMember, tcp, public}, Verdict: Accept},
		FirewallRule{Name: "guests to members", Conds: []Cond{fromGuest, toMember}, Verdict: Drop},
		FirewallRule{Name: "guests to the outside", Conds: []Cond{fromGuest}, Verdict: Accept},
		FirewallRule{Name: "lan to pods and services", Conds: []Cond{toCluster}, Verdict: Drop},
		FirewallRule{Name: "lan to public ports", Conds: []Cond{local, tcp, public}, Verdict: Accept},
		FirewallRule{Name: "lan to internal tcp", Conds: []Cond{local, tcp, {Kind: CondDPortIn, Arg: InternalTCP}}, Verdict: Drop},
		FirewallRule{Name: "lan to internal udp", Conds: []Cond{local, udp, {Kind: CondDPortIn, Arg: InternalUDP}}, Verdict: Drop},
	)
	fwd := []FirewallRule{
		{Name: "tracked", Conds: []Cond{est}, Verdict: Accept},
		{Name: "dnat judged in prerouting", Conds: []Cond{{Kind: CondDNAT}}, Verdict: Accept},
	}
	fwd = append(fwd, controlOnly...)
	fwd = append(fwd, trusted...)
	fwd = append(fwd, FirewallRule{Name: "untrusted to pods and services", Conds: []Cond{toCluster}, Verdict: Drop})
	rs.Chains = []FirewallChain{{Name: ChainPrerouting, Rules: pre}, {Name: ChainForward, Rules: fwd}}
	return rs, nil
}

// prefixes4 parses IPv4 CIDRs (masked, sorted, without duplicates or overlaps: an
// interval set refuses overlapping elements).
func prefixes4(cidrs []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil || !p.Addr().Is4() {
			return nil, fmt.Errorf("%q is not an IPv4 CIDR", c)
		}
		out = append(out, p.Masked())
	}
	return mergePrefixes(out), nil
}

// TrustedMembers are spec.Members without any address inside a guest network or the pod or
// service CIDR (pure): those are guests' or the cluster's own addresses, never a node's, and
// trusting one as a member (a joiner that gave a floating IP as its address, say) would
// open the host to guests. What does not parse is kept, for memberSets to refuse.
func TrustedMembers(spec FirewallSpec) []string {
	var nets []netip.Prefix
	for _, c := range append(append([]string(nil), spec.GuestNets...), spec.PodCIDR, spec.ServiceCIDR) {
		if p, err := netip.ParsePrefix(c); err == nil {
			nets = append(nets, p.Masked())
		}
	}
	var out []string
	for _, a := range spec.Members {
		ip, err := netip.ParseAddr(a)
		if err == nil && slices.ContainsFunc(nets, func(p netip.Prefix) bool { return p.Contains(ip.Unmap()) }) {
			continue
		}
		out = append(out, a)
	}
	return out
}

// memberSets parses member addresses into IPv4 and IPv6 host prefixes, sorted, unique.
func memberSets(addrs []string) (v4, v6 []netip.Prefix, err error) {
	for _, a := range addrs {
		ip, err := netip.ParseAddr(a)
		if err != nil || ip.Zone() != "" {
			return nil, nil, fmt.Errorf("member address %q is not an IP address", a)
		}
		ip = ip.Unmap()
		p := netip.PrefixFrom(ip, ip.BitLen())
		if ip.Is4() {
			v4 = append(v4, p)
		} else {
			v6 = append(v6, p)
		}
	}
	cmp := func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) }
	slices.SortFunc(v4, cmp)
	slices.SortFunc(v6, cmp)
	return slices.Compact(v4), slices.Compact(v6), nil
}

// sourceSets parses addresses and CIDRs into IPv4 and IPv6 prefixes, masked, sorted,
// without overlaps (an interval set refuses overlapping elements).
func sourceSets(items []string) (v4, v6 []netip.Prefix, err error) {
	for _, a := range items {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			ip, perr := netip.ParseAddr(a)
			if perr != nil || ip.Zone() != "" {
				return nil, nil, fmt.Errorf("%q is not an IP address or CIDR", a)
			}
			ip = ip.Unmap()
			p = netip.PrefixFrom(ip, ip.BitLen())
		}
		p = p.Masked()
		if p.Addr().Is4() {
			v4 = append(v4, p)
		} else {
			v6 = append(v6, p)
		}
	}
	return mergePrefixes(v4), mergePrefixes(v6), nil
}

// mergePrefixes sorts ps and drops every prefix inside an earlier one.
func mergePrefixes(ps []netip.Prefix) []netip.Prefix {
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	var merged []netip.Prefix
	for _, p := range ps {
		if n := len(merged); n > 0 && merged[n-1].Overlaps(p) {
			continue // sorted: the earlier (shorter or equal) prefix contains p
		}
		merged = append(merged, p)
	}
	return merged
}

// MergePorts sorts ranges and merges those that overlap or touch (pure).
func MergePorts(rs []PortRange) []PortRange {
	rs = slices.Clone(rs)
	for i, r := range rs {
		if r.Last < r.First {
			rs[i] = PortRange{r.Last, r.First}
		}
	}
	slices.SortFunc(rs, func(a, b PortRange) int { return int(a.First) - int(b.First) })
	var out []PortRange
	for _, r := range rs {
		if n := len(out); n > 0 && uint32(r.First) <= uint32(out[n-1].Last)+1 {
			out[n-1].Last = max(out[n-1].Last, r.Last)
			continue
		}
		out = append(out, r)
	}
	return out
}
