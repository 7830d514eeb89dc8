package netsetup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// nftConn opens an nftables netlink connection in the namespace at nsPath ("" =
// current); close the returned file when done.
func nftConn(nsPath string) (*nftables.Conn, func(), error) {
	if nsPath == "" {
		c, err := nftables.New()
		if err != nil {
			return nil, nil, fmt.Errorf("nftables: %w", err)
		}
		return c, func() {}, nil
	}
	f, err := os.Open(nsPath)
	if err != nil {
		return nil, nil, fmt.Errorf("open netns %s: %w", nsPath, err)
	}
	c, err := nftables.New(nftables.WithNetNSFd(int(f.Fd())))
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("nftables in %s: %w", nsPath, err)
	}
	return c, func() { f.Close() }, nil
}

func osdTable() *nftables.Table {
	return &nftables.Table{Family: nftables.TableFamilyIPv4, Name: NATTable}
}

// observeNAT returns the identities (user data) of the rules in osd's table, or nil
// when the table does not exist.
func observeNAT(nsPath string) ([]string, error) {
	c, done, err := nftConn(nsPath)
	if err != nil {
		return nil, err
	}
	defer done()
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return nil, fmt.Errorf("list nftables tables: %w", err)
	}
	var table *nftables.Table
	for _, t := range tables {
		if t.Name == NATTable {
			table = t
		}
	}
	if table == nil {
		return nil, nil
	}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return nil, fmt.Errorf("list nftables chains: %w", err)
	}
	ids := []string{}
	for _, ch := range chains {
		if ch.Table.Name != NATTable {
			continue
		}
		rules, err := c.GetRules(table, ch)
		if err != nil {
			return nil, fmt.Errorf("list rules of chain %s: %w", ch.Name, err)
		}
		for _, r := range rules {
			ids = append(ids, string(r.UserData))
		}
	}
	return ids, nil
}

// ensureNAT replaces osd's table with the masquerade and forward rules for n, in one
// netlink batch. It returns whether the table existed before.
func ensureNAT(nsPath string, n ExternalNetwork) (existed bool, err error) {
	_, ipnet, err := net.ParseCIDR(n.CIDR)
	if err != nil || ipnet.IP.To4() == nil {
		return false, fmt.Errorf("nat for %q: not an IPv4 CIDR", n.CIDR)
	}
	before, err := observeNAT(nsPath)
	if err != nil {
		return false, err
	}
	c, done, err := nftConn(nsPath)
	if err != nil {
		return false, err
	}
	defer done()
	t := osdTable()
	if before != nil {
		c.DelTable(t)
	}
	c.AddTable(t)
	post := c.AddChain(&nftables.Chain{Name: "postrouting", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
	accept := nftables.ChainPolicyAccept
	fwd := c.AddChain(&nftables.Chain{Name: "forward", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &accept})

	c.AddRule(&nftables.Rule{Table: t, Chain: post, UserData: []byte(masqRuleID(n)),
		Exprs: append(matchNet(12, ipnet), append(matchOifNot(n.Bridge), &expr.Masq{})...)})
	c.AddRule(&nftables.Rule{Table: t, Chain: fwd, UserData: []byte(fwdOutRuleID(n)),
		Exprs: append(matchNet(12, ipnet), &expr.Verdict{Kind: expr.VerdictAccept})})
	c.AddRule(&nftables.Rule{Table: t, Chain: fwd, UserData: []byte(fwdInRuleID(n)),
		Exprs: append(matchNet(16, ipnet), append(matchEstablished(), &expr.Verdict{Kind: expr.VerdictAccept})...)})
	if err := c.Flush(); err != nil {
		return before != nil, fmt.Errorf("write nftables table ip %s: %w", NATTable, err)
	}
	return before != nil, nil
}

// deleteNAT removes osd's table if it exists; it reports whether it did.
func deleteNAT(nsPath string) (bool, error) {
	before, err := observeNAT(nsPath)
	if err != nil || before == nil {
		return false, err
	}
	c, done, err := nftConn(nsPath)
	if err != nil {
		return false, err
	}
	defer done()
	c.DelTable(osdTable())
	if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return false, fmt.Errorf("delete nftables table ip %s: %w", NATTable, err)
	}
	return true, nil
}

// matchNet matches the IPv4 address at header offset off (12 saddr, 16 daddr) in ipnet.
func matchNet(off uint32, ipnet *net.IPNet) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte(ipnet.Mask), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte(ipnet.IP.To4())},
	}
}

func matchOifNot(name string) []expr.Any {
	ifname := make([]byte, unix.IFNAMSIZ)
	copy(ifname, name)
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: ifname},
	}
}

func matchEstablished() []expr.Any {
	mask := make([]byte, 4)
	binary.NativeEndian.PutUint32(mask, expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED)
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
	}
}
