package netsetup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ctStatusDstNAT is conntrack's IPS_DST_NAT status bit: the connection was DNATed.
const ctStatusDstNAT = 1 << 5

func filterTable() *nftables.Table {
	return &nftables.Table{Family: nftables.TableFamilyINet, Name: FilterTable}
}

// observedFirewall is what osd's filter table holds: its rules' identities in chain
// order and the members' sets, or absent.
type observedFirewall struct {
	Present bool
	RuleIDs []string
	Members []string // both members' sets, as addresses
}

func observeFirewall(nsPath string) (observedFirewall, error) {
	var o observedFirewall
	c, done, err := nftConn(nsPath)
	if err != nil {
		return o, err
	}
	defer done()
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return o, fmt.Errorf("list nftables tables: %w", err)
	}
	var t *nftables.Table
	for _, tt := range tables {
		if tt.Name == FilterTable {
			t = tt
		}
	}
	if t == nil {
		return o, nil
	}
	o.Present = true
	for _, name := range []string{ChainPrerouting, ChainForward} {
		rules, err := c.GetRules(t, &nftables.Chain{Name: name, Table: t})
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return o, fmt.Errorf("list rules of chain %s: %w", name, err)
		}
		for _, r := range rules {
			o.RuleIDs = append(o.RuleIDs, string(r.UserData))
		}
	}
	for _, name := range []string{MembersSet4, MembersSet6} {
		s, err := c.GetSetByName(t, name)
		if err != nil {
			continue // an older or damaged table: the rule identities will not match either
		}
		els, err := c.GetSetElements(s)
		if err != nil {
			return o, fmt.Errorf("list set %s: %w", name, err)
		}
		for _, e := range els {
			if a, ok := netip.AddrFromSlice(e.Key); ok {
				o.Members = append(o.Members, a.String())
			}
		}
	}
	slices.Sort(o.Members)
	return o, nil
}

// EnsureFirewall makes osd's filter table in the namespace at nsPath ("" = the caller's)
// the one of spec, in one netlink transaction (no moment without rules). A table whose
// rules are already spec's keeps them; only its members' sets are brought to spec's
// members. The tracked connections of addresses that are no longer members are forgotten.
// It reports whether it changed anything.
func EnsureFirewall(nsPath string, spec FirewallSpec) (bool, error) {
	rs, err := FirewallRules(spec)
	if err != nil {
		return false, err
	}
	obs, err := observeFirewall(nsPath)
	if err != nil {
		return false, err
	}
	if obs.Present && slices.Equal(obs.RuleIDs, rs.RuleIDs()) {
		want := memberStrings(rs)
		if slices.Equal(obs.Members, want) {
			return false, nil
		}
		return true, setMembers(nsPath, rs, obs.Members)
	}
	c, done, err := nftConn(nsPath)
	if err != nil {
		return false, err
	}
	defer done()
	t := filterTable()
	if obs.Present {
		c.DelTable(t)
	}
	c.AddTable(t)
	sets := map[string]*nftables.Set{}
	for _, fs := range rs.Sets {
		s, els := nftSet(t, fs)
		if err := c.AddSet(s, els); err != nil {
			return false, fmt.Errorf("set %s: %w", fs.Name, err)
		}
		sets[fs.Name] = s
	}
	accept := nftables.ChainPolicyAccept
	hooks := map[string]*nftables.ChainHook{ChainPrerouting: nftables.ChainHookPrerouting, ChainForward: nftables.ChainHookForward}
	digest := rs.Digest()
	for _, fc := range rs.Chains {
		ch := c.AddChain(&nftables.Chain{Name: fc.Name, Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: hooks[fc.Name], Priority: nftables.ChainPriorityRef(FirewallPriority), Policy: &accept})
		for _, r := range fc.Rules {
			exprs, err := ruleExprs(r, sets, rs)
			if err != nil {
				return false, err
			}
			c.AddRule(&nftables.Rule{Table: t, Chain: ch, UserData: []byte(ruleID(digest, fc.Name, r)), Exprs: exprs})
		}
	}
	if err := c.Flush(); err != nil {
		return false, fmt.Errorf("write nftables table inet %s: %w", FilterTable, err)
	}
	return true, forgetConnections(nsPath, departed(obs.Members, rs))
}

// DeleteFirewall removes osd's filter table if it exists; it reports whether it did.
func DeleteFirewall(nsPath string) (bool, error) {
	obs, err := observeFirewall(nsPath)
	if err != nil || !obs.Present {
		return false, err
	}
	c, done, err := nftConn(nsPath)
	if err != nil {
		return false, err
	}
	defer done()
	c.DelTable(filterTable())
	if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return false, fmt.Errorf("delete nftables table inet %s: %w", FilterTable, err)
	}
	return true, nil
}

// SetFirewallMembers makes the members' sets hold exactly members, in place and in one
// transaction. Without osd's filter table it does nothing (false, nil).
func SetFirewallMembers(nsPath string, members []string) (bool, error) {
	m4, m6, err := memberSets(members)
	if err != nil {
		return false, err
	}
	obs, err := observeFirewall(nsPath)
	if err != nil || !obs.Present {
		return false, err
	}
	rs := Ruleset{Sets: []FirewallSet{{Name: MembersSet4, Kind: SetAddr4, Prefixes: m4}, {Name: MembersSet6, Kind: SetAddr6, Prefixes: m6}}}
	if slices.Equal(obs.Members, memberStrings(rs)) {
		return false, nil
	}
	return true, setMembers(nsPath, rs, obs.Members)
}

// setMembers replaces the members' sets' elements (before) with rs's, in one
// transaction, and forgets the tracked connections of those that left.
func setMembers(nsPath string, rs Ruleset, before []string) error {
	c, done, err := nftConn(nsPath)
	if err != nil {
		return err
	}
	defer done()
	t := filterTable()
	for _, name := range []string{MembersSet4, MembersSet6} {
		fs, _ := rs.Set(name)
		s, els := nftSet(t, fs)
		c.FlushSet(s)
		if len(els) > 0 {
			if err := c.SetAddElements(s, els); err != nil {
				return err
			}
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("set the members of nftables table inet %s: %w", FilterTable, err)
	}
	return forgetConnections(nsPath, departed(before, rs))
}

// departed are the addresses of before that rs's members' sets no longer hold.
func departed(before []string, rs Ruleset) []netip.Prefix {
	keep := memberStrings(rs)
	var gone []netip.Prefix
	for _, a := range before {
		if ip, err := netip.ParseAddr(a); err == nil && !slices.Contains(keep, a) {
			gone = append(gone, netip.PrefixFrom(ip, ip.BitLen()))
		}
	}
	return gone
}

// forgetConnections deletes the conntrack entries whose original source is one of addrs:
// a removed member's open connections (a kubelet's watch on the API server) would
// otherwise go on as "established" past the rules that no longer trust it.
func forgetConnections(nsPath string, addrs []netip.Prefix) error {
	if len(addrs) == 0 {
		return nil
	}
	nl, err := netlinkHandle(nsPath)
	if err != nil {
		return err
	}
	defer nl.Close()
	for _, p := range addrs {
		f := &netlink.ConntrackFilter{}
		if err := f.AddIP(netlink.ConntrackOrigSrcIP, p.Addr().AsSlice()); err != nil {
			return err
		}
		family := netlink.InetFamily(unix.AF_INET)
		if p.Addr().Is6() {
			family = unix.AF_INET6
		}
		n, err := nl.ConntrackDeleteFilters(netlink.ConntrackTable, family, f)
		if err != nil {
			return fmt.Errorf("forget the connections of %s: %w", p.Addr(), err)
		}
		if n > 0 {
			slog.Info("netsetup: forgot the tracked connections of a former member", "address", p.Addr().String(), "connections", n)
		}
	}
	return nil
}

func memberStrings(rs Ruleset) []string {
	var out []string
	for _, name := range []string{MembersSet4, MembersSet6} {
		fs, _ := rs.Set(name)
		for _, p := range fs.Prefixes {
			out = append(out, p.Addr().String())
		}
	}
	slices.Sort(out)
	return out
}

func addrElements(ps []netip.Prefix) []nftables.SetElement {
	els := make([]nftables.SetElement, len(ps))
	for i, p := range ps {
		els[i] = nftables.SetElement{Key: p.Addr().AsSlice()}
	}
	return els
}

// nftSet is fs as an nftables set and its elements. An interval element is its first
// key and, flagged IntervalEnd, the key after its last (none when that would wrap).
func nftSet(t *nftables.Table, fs FirewallSet) (*nftables.Set, []nftables.SetElement) {
	s := &nftables.Set{Table: t, Name: fs.Name, Interval: fs.Interval}
	switch fs.Kind {
	case SetAddr4:
		s.KeyType = nftables.TypeIPAddr
	case SetAddr6:
		s.KeyType = nftables.TypeIP6Addr
	case SetPort:
		s.KeyType = nftables.TypeInetService
	}
	var els []nftables.SetElement
	if !fs.Interval {
		els = addrElements(fs.Prefixes)
		for _, p := range fs.Ports {
			els = append(els, nftables.SetElement{Key: binary.BigEndian.AppendUint16(nil, p.First)})
		}
		return s, els
	}
	for _, p := range fs.Prefixes {
		els = append(els, nftables.SetElement{Key: p.Addr().AsSlice()})
		if end, ok := prefixEnd(p); ok {
			els = append(els, nftables.SetElement{Key: end.AsSlice(), IntervalEnd: true})
		}
	}
	for _, r := range fs.Ports {
		els = append(els, nftables.SetElement{Key: binary.BigEndian.AppendUint16(nil, r.First)})
		if r.Last < 65535 {
			els = append(els, nftables.SetElement{Key: binary.BigEndian.AppendUint16(nil, r.Last+1), IntervalEnd: true})
		}
	}
	return s, els
}

// prefixEnd is the address after the last of p (false when p reaches the end).
func prefixEnd(p netip.Prefix) (netip.Addr, bool) {
	b := p.Masked().Addr().AsSlice()
	bits := p.Bits()
	for i := range b {
		lo := i * 8
		switch {
		case bits >= lo+8:
		case bits <= lo:
			b[i] = 0xff
		default:
			b[i] |= byte(0xff >> (bits - lo))
		}
	}
	last, _ := netip.AddrFromSlice(b)
	next := last.Next()
	return next, next.IsValid()
}

// ruleExprs renders r's matches and verdict as nftables expressions.
func ruleExprs(r FirewallRule, sets map[string]*nftables.Set, rs Ruleset) ([]expr.Any, error) {
	var out []expr.Any
	for _, c := range r.Conds {
		switch c.Kind {
		case CondEstablished:
			out = append(out, matchEstablished()...)
		case CondDNAT:
			mask := make([]byte, 4)
			binary.NativeEndian.PutUint32(mask, ctStatusDstNAT)
			out = append(out,
				&expr.Ct{Register: 1, Key: expr.CtKeySTATUS},
				&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: make([]byte, 4)},
				&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)})
		case CondIIF:
			ifname := make([]byte, unix.IFNAMSIZ)
			copy(ifname, c.Arg)
			out = append(out, &expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname})
		case CondSrcIn, CondDstIn:
			fs, ok := rs.Set(c.Arg)
			s := sets[c.Arg]
			if !ok || s == nil {
				return nil, fmt.Errorf("rule %q: no set %s", r.Name, c.Arg)
			}
			proto, off, n := byte(unix.NFPROTO_IPV4), uint32(12), uint32(4)
			if fs.Kind == SetAddr6 {
				proto, off, n = unix.NFPROTO_IPV6, 8, 16
			}
			if c.Kind == CondDstIn {
				off += n
			}
			out = append(out,
				&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n},
				&expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID})
		case CondDstLocal:
			out = append(out,
				&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.NativeEndian.AppendUint32(nil, unix.RTN_LOCAL)})
		case CondProto:
			p, ok := map[string]byte{"tcp": unix.IPPROTO_TCP, "udp": unix.IPPROTO_UDP, "icmp": unix.IPPROTO_ICMP}[c.Arg]
			if !ok {
				return nil, fmt.Errorf("rule %q: unknown protocol %q", r.Name, c.Arg)
			}
			out = append(out, &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}})
		case CondDPortIn:
			s := sets[c.Arg]
			if s == nil {
				return nil, fmt.Errorf("rule %q: no set %s", r.Name, c.Arg)
			}
			out = append(out,
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
				&expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID})
		default:
			return nil, fmt.Errorf("rule %q: unknown match %q", r.Name, c.Kind)
		}
	}
	v := expr.VerdictAccept
	if r.Verdict == Drop {
		v = expr.VerdictDrop
	}
	return append(out, &expr.Verdict{Kind: v}), nil
}
