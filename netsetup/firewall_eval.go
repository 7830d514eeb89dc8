package netsetup

import (
	"net/netip"
	"slices"
)

// Packet is what the firewall sees of one packet in a chain.
type Packet struct {
	Src, Dst    netip.Addr // Dst as the chain sees it (in forward: after DNAT)
	Proto       string     // "tcp", "udp" or "icmp"
	DPort       uint16
	IIF         string
	Established bool // conntrack: a reply or related packet of a tracked connection
	DNAT        bool // conntrack: the connection was DNATed
	DstLocal    bool // Dst is an address of this host
}

// Evaluate is the verdict of chain on p and the name of the rule that gave it ("" for
// the chain's policy, accept): the model of what the kernel does with rs (pure).
func (rs Ruleset) Evaluate(chain string, p Packet) (verdict, rule string) {
	for _, c := range rs.Chains {
		if c.Name != chain {
			continue
		}
		for _, r := range c.Rules {
			if rs.matches(r, p) {
				return r.Verdict, r.Name
			}
		}
	}
	return Accept, ""
}

func (rs Ruleset) matches(r FirewallRule, p Packet) bool {
	for _, c := range r.Conds {
		if !rs.cond(c, p) {
			return false
		}
	}
	return true
}

func (rs Ruleset) cond(c Cond, p Packet) bool {
	switch c.Kind {
	case CondEstablished:
		return p.Established
	case CondDNAT:
		return p.DNAT
	case CondIIF:
		return p.IIF == c.Arg
	case CondSrcIn:
		return rs.inAddrSet(c.Arg, p.Src)
	case CondDstIn:
		return rs.inAddrSet(c.Arg, p.Dst)
	case CondDstLocal:
		return p.DstLocal
	case CondProto:
		return p.Proto == c.Arg
	case CondDPortIn:
		s, ok := rs.Set(c.Arg)
		return ok && slices.ContainsFunc(s.Ports, func(r PortRange) bool { return r.First <= p.DPort && p.DPort <= r.Last })
	}
	return false
}

func (rs Ruleset) inAddrSet(name string, a netip.Addr) bool {
	s, ok := rs.Set(name)
	if !ok || !a.IsValid() {
		return false
	}
	a = a.Unmap()
	if (s.Kind == SetAddr4) != a.Is4() {
		return false
	}
	return slices.ContainsFunc(s.Prefixes, func(p netip.Prefix) bool { return p.Contains(a) })
}
