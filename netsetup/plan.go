package netsetup

import (
	"fmt"
	"net"
	"slices"
	"strings"
)

// ExternalNetwork describes br-ex and the external network behind it.
type ExternalNetwork struct {
	Bridge    string // the external bridge; default "br-ex"
	CIDR      string // the external subnet; default 172.24.4.0/24
	GatewayIP string // the host's address on Bridge, the subnet's gateway; default the first host of CIDR
	// Interface, if set, is a host NIC moved into Bridge (its IPv4 addresses and routes
	// move to Bridge) instead of the isolated, NATed default network; CIDR and
	// GatewayIP are then unused.
	Interface string
}

// Spec is the desired host network.
type Spec struct {
	Datapath string // OVS datapath type of Bridge: DatapathSystem or DatapathNetdev
	External ExternalNetwork
}

// DefaultExternalNetwork returns the isolated external network osd creates by default.
func DefaultExternalNetwork() ExternalNetwork {
	return ExternalNetwork{Bridge: "br-ex", CIDR: "172.24.4.0/24", GatewayIP: "172.24.4.1"}
}

// Normalize fills defaults and validates n.
func (n ExternalNetwork) Normalize() (ExternalNetwork, error) {
	d := DefaultExternalNetwork()
	if n.Bridge == "" {
		n.Bridge = d.Bridge
	}
	if n.Interface != "" {
		if n.Interface == n.Bridge {
			return n, fmt.Errorf("external interface %s is the bridge itself", n.Interface)
		}
		return n, nil
	}
	if n.CIDR == "" {
		n.CIDR = d.CIDR
	}
	_, ipnet, err := net.ParseCIDR(n.CIDR)
	if err != nil || ipnet.IP.To4() == nil {
		return n, fmt.Errorf("external network %q is not an IPv4 CIDR", n.CIDR)
	}
	n.CIDR = ipnet.String()
	if n.GatewayIP == "" {
		gw := slices.Clone(ipnet.IP.To4())
		gw[3]++
		n.GatewayIP = gw.String()
	}
	gw := net.ParseIP(n.GatewayIP)
	if gw == nil || gw.To4() == nil || !ipnet.Contains(gw) {
		return n, fmt.Errorf("external gateway %q is not an IPv4 address in %s", n.GatewayIP, n.CIDR)
	}
	return n, nil
}

// GatewayCIDR returns the gateway address with the network's prefix, e.g. 172.24.4.1/24.
func (n ExternalNetwork) GatewayCIDR() string {
	_, ipnet, err := net.ParseCIDR(n.CIDR)
	if err != nil {
		return ""
	}
	ones, _ := ipnet.Mask.Size()
	return fmt.Sprintf("%s/%d", n.GatewayIP, ones)
}

// Route is an IPv4 route as osd observes, moves and restores it.
type Route struct {
	Dst      string `json:"dst"`           // "" for the default route, else a CIDR
	Gw       string `json:"gw,omitempty"`  // next hop, "" for on-link
	Src      string `json:"src,omitempty"` // preferred source
	Priority int    `json:"priority,omitempty"`
	Protocol int    `json:"protocol,omitempty"`
	Scope    int    `json:"scope,omitempty"`
	Table    int    `json:"table,omitempty"`
}

func (r Route) String() string {
	dst := r.Dst
	if dst == "" {
		dst = "default"
	}
	if r.Gw != "" {
		dst += " via " + r.Gw
	}
	if r.Priority != 0 {
		dst += fmt.Sprintf(" metric %d", r.Priority)
	}
	return dst
}

// LinkState is what osd observes of one network link.
type LinkState struct {
	Exists bool
	Up     bool
	Addrs  []string // IPv4 addresses as CIDRs, e.g. "172.24.4.1/24"
	Routes []Route  // IPv4 routes through the link that the kernel did not add by itself
}

// BridgeState is what osd observes of one OVS bridge.
type BridgeState struct {
	DatapathType string
	Ports        map[string]string // port name -> interface type
}

// State is the observed host network, as far as Spec cares.
type State struct {
	Bridges   map[string]BridgeState // OVS bridges by name
	Links     map[string]LinkState   // the bridge's and the interface's links by name
	IPForward string                 // net.ipv4.ip_forward: "0" or "1"
	NATRules  []string               // identities of the rules in osd's nftables table; nil if it is absent
}

// OpKind names one kind of host change.
type OpKind string

// The kinds of host change Plan can ask for.
const (
	OpEnsureBridge     OpKind = "ensure-bridge"      // create Bridge, or set its datapath type
	OpAddPort          OpKind = "add-port"           // add Port (Link) to Bridge
	OpLinkUp           OpKind = "link-up"            // set Link up
	OpAddAddr          OpKind = "add-addr"           // add Addr to Link
	OpMoveIPConfig     OpKind = "move-ip-config"     // move Addrs and Routes from Link to Bridge
	OpEnableForwarding OpKind = "enable-forwarding"  // net.ipv4.ip_forward=1
	OpEnsureNAT        OpKind = "ensure-nat"         // (re)create osd's nftables table for CIDR
	OpProbe            OpKind = "probe-connectivity" // check the host is still reachable, else roll back
)

// Op is one host change. Which fields matter depends on Kind.
type Op struct {
	Kind     OpKind
	Bridge   string
	Datapath string
	Link     string
	Addr     string
	Addrs    []string
	Routes   []Route
	CIDR     string
}

// String describes the op for humans.
func (o Op) String() string {
	switch o.Kind {
	case OpEnsureBridge:
		return fmt.Sprintf("create OVS bridge %s (datapath %s)", o.Bridge, o.Datapath)
	case OpAddPort:
		return fmt.Sprintf("add %s to OVS bridge %s", o.Link, o.Bridge)
	case OpLinkUp:
		return fmt.Sprintf("set link %s up", o.Link)
	case OpAddAddr:
		return fmt.Sprintf("add address %s to %s", o.Addr, o.Link)
	case OpMoveIPConfig:
		rs := make([]string, len(o.Routes))
		for i, r := range o.Routes {
			rs[i] = r.String()
		}
		return fmt.Sprintf("move addresses [%s] and routes [%s] from %s to %s",
			strings.Join(o.Addrs, ", "), strings.Join(rs, ", "), o.Link, o.Bridge)
	case OpEnableForwarding:
		return "enable IPv4 forwarding"
	case OpEnsureNAT:
		return fmt.Sprintf("masquerade %s leaving through any interface but %s (nftables table ip %s)", o.CIDR, o.Bridge, NATTable)
	case OpProbe:
		if o.Addr == "" {
			return fmt.Sprintf("check connectivity through %s, else roll back", o.Bridge)
		}
		return fmt.Sprintf("check that gateway %s answers through %s, else roll back", o.Addr, o.Bridge)
	}
	return string(o.Kind)
}

// Plan returns the ops that bring observed to desired, in the order they must run.
// It is pure. desired must be normalized (ExternalNetwork.Normalize).
func Plan(observed State, desired Spec) []Op {
	n := desired.External
	var ops []Op
	if b, ok := observed.Bridges[n.Bridge]; !ok || b.DatapathType != desired.Datapath {
		ops = append(ops, Op{Kind: OpEnsureBridge, Bridge: n.Bridge, Datapath: desired.Datapath})
	}
	if n.Interface != "" {
		return append(ops, planInterface(observed, n)...)
	}
	if !observed.Links[n.Bridge].Up {
		ops = append(ops, Op{Kind: OpLinkUp, Link: n.Bridge})
	}
	if gw := n.GatewayCIDR(); !slices.Contains(observed.Links[n.Bridge].Addrs, gw) {
		ops = append(ops, Op{Kind: OpAddAddr, Link: n.Bridge, Addr: gw})
	}
	if observed.IPForward != "1" {
		ops = append(ops, Op{Kind: OpEnableForwarding})
	}
	want := NATRuleIDs(n)
	got := slices.Clone(observed.NATRules)
	slices.Sort(got)
	if observed.NATRules == nil || !slices.Equal(got, want) {
		ops = append(ops, Op{Kind: OpEnsureNAT, Bridge: n.Bridge, CIDR: n.CIDR})
	}
	return ops
}

func planInterface(observed State, n ExternalNetwork) []Op {
	var ops []Op
	risky := false
	if _, ok := observed.Bridges[n.Bridge].Ports[n.Interface]; !ok {
		ops = append(ops, Op{Kind: OpAddPort, Bridge: n.Bridge, Link: n.Interface})
		risky = true
	}
	if !observed.Links[n.Bridge].Up {
		ops = append(ops, Op{Kind: OpLinkUp, Link: n.Bridge})
	}
	nic := observed.Links[n.Interface]
	if len(nic.Addrs) > 0 || len(nic.Routes) > 0 {
		ops = append(ops, Op{Kind: OpMoveIPConfig, Link: n.Interface, Bridge: n.Bridge,
			Addrs: slices.Clone(nic.Addrs), Routes: slices.Clone(nic.Routes)})
		risky = true
	}
	if risky {
		gw := defaultGateway(nic.Routes)
		if gw == "" {
			gw = defaultGateway(observed.Links[n.Bridge].Routes)
		}
		ops = append(ops, Op{Kind: OpProbe, Bridge: n.Bridge, Link: n.Interface, Addr: gw})
	}
	return ops
}

func defaultGateway(routes []Route) string {
	for _, r := range routes {
		if r.Dst == "" && r.Gw != "" {
			return r.Gw
		}
	}
	return ""
}

// NATTable is the name of osd's own nftables table (family ip).
const NATTable = "osd"

// NATRuleIDs returns the sorted identities of the nftables rules the default external
// network needs; each rule carries its identity as user data, so observing the table
// tells whether it matches.
func NATRuleIDs(n ExternalNetwork) []string {
	ids := []string{masqRuleID(n), fwdOutRuleID(n), fwdInRuleID(n)}
	slices.Sort(ids)
	return ids
}

func masqRuleID(n ExternalNetwork) string {
	return "postrouting: masquerade ip saddr " + n.CIDR + " oifname != " + n.Bridge
}

func fwdOutRuleID(n ExternalNetwork) string { return "forward: accept ip saddr " + n.CIDR }

func fwdInRuleID(n ExternalNetwork) string {
	return "forward: accept ip daddr " + n.CIDR + " ct state established,related"
}
