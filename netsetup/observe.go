package netsetup

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"

	"github.com/osdcloud/osd/netsetup/ovsdb"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Observe reads the part of the host network that spec is about: OVS bridges, the
// links of the bridge and the interface, ip_forward and osd's nftables table.
func Observe(ctx context.Context, h Host, o *ovsdb.OVS, spec Spec) (State, error) {
	st := State{Bridges: map[string]BridgeState{}, Links: map[string]LinkState{}}
	bridges, err := o.Bridges(ctx)
	if err != nil {
		return st, err
	}
	for _, b := range bridges {
		bs := BridgeState{DatapathType: b.DatapathType, Ports: map[string]string{}}
		for _, p := range b.Ports {
			bs.Ports[p.Name] = p.Type
		}
		st.Bridges[b.Name] = bs
	}
	nl, err := netlinkHandle(h.NetNS)
	if err != nil {
		return st, err
	}
	defer nl.Close()
	for _, name := range []string{spec.External.Bridge, spec.External.Interface} {
		if name == "" {
			continue
		}
		ls, err := observeLink(nl, name)
		if err != nil {
			return st, err
		}
		st.Links[name] = ls
	}
	if st.IPForward, err = readIPForward(h.NetNS); err != nil {
		return st, err
	}
	if st.NATRules, err = observeNAT(h.NetNS); err != nil {
		return st, err
	}
	return st, nil
}

func observeLink(nl *netlink.Handle, name string) (LinkState, error) {
	link, err := nl.LinkByName(name)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return LinkState{}, nil
	}
	if err != nil {
		return LinkState{}, fmt.Errorf("link %s: %w", name, err)
	}
	ls := LinkState{Exists: true, Up: link.Attrs().Flags&net.FlagUp != 0}
	addrs, err := linkAddrs(nl, link)
	if err != nil {
		return ls, err
	}
	for _, a := range addrs {
		ls.Addrs = append(ls.Addrs, a.IPNet.String())
	}
	routes, err := linkRoutes(nl, link)
	if err != nil {
		return ls, err
	}
	for _, r := range routes {
		ls.Routes = append(ls.Routes, toRoute(r))
	}
	return ls, nil
}

// linkAddrs returns the IPv4 addresses of link.
func linkAddrs(nl *netlink.Handle, link netlink.Link) ([]netlink.Addr, error) {
	addrs, err := nl.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("addresses of %s: %w", link.Attrs().Name, err)
	}
	return addrs, nil
}

// linkRoutes returns the IPv4 routes of the main table through link that the kernel
// did not add by itself (those come back with the addresses), on-link routes first.
func linkRoutes(nl *netlink.Handle, link netlink.Link) ([]netlink.Route, error) {
	all, err := nl.RouteListFiltered(netlink.FAMILY_V4,
		&netlink.Route{LinkIndex: link.Attrs().Index, Table: unix.RT_TABLE_MAIN},
		netlink.RT_FILTER_OIF|netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("routes of %s: %w", link.Attrs().Name, err)
	}
	var out []netlink.Route
	for _, r := range all {
		if r.Protocol == unix.RTPROT_KERNEL {
			continue
		}
		out = append(out, r)
	}
	slices.SortStableFunc(out, func(a, b netlink.Route) int {
		return boolInt(a.Gw != nil) - boolInt(b.Gw != nil)
	})
	return out, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func toRoute(r netlink.Route) Route {
	out := Route{Priority: r.Priority, Protocol: int(r.Protocol), Scope: int(r.Scope), Table: r.Table}
	if r.Dst != nil {
		if ones, _ := r.Dst.Mask.Size(); ones > 0 {
			out.Dst = r.Dst.String()
		}
	}
	if r.Gw != nil {
		out.Gw = r.Gw.String()
	}
	if r.Src != nil {
		out.Src = r.Src.String()
	}
	return out
}

func fromRoute(r Route, linkIndex int) (netlink.Route, error) {
	out := netlink.Route{LinkIndex: linkIndex, Priority: r.Priority, Protocol: netlink.RouteProtocol(r.Protocol),
		Scope: netlink.Scope(r.Scope), Table: r.Table, Family: netlink.FAMILY_V4}
	if r.Dst != "" {
		_, dst, err := net.ParseCIDR(r.Dst)
		if err != nil {
			return out, fmt.Errorf("route %s: %w", r, err)
		}
		out.Dst = dst
	}
	if r.Gw != "" {
		out.Gw = net.ParseIP(r.Gw)
	}
	if r.Src != "" {
		out.Src = net.ParseIP(r.Src)
	}
	return out, nil
}

func ipForwardPath() string { return "/proc/sys/net/ipv4/ip_forward" }

// readIPForward reads net.ipv4.ip_forward of the namespace at nsPath.
func readIPForward(nsPath string) (string, error) {
	var v string
	err := inNetNS(nsPath, func() error {
		b, err := os.ReadFile(ipForwardPath())
		v = strings.TrimSpace(string(b))
		return err
	})
	if err != nil {
		return "", fmt.Errorf("read ip_forward: %w", err)
	}
	return v, nil
}

// writeIPForward sets net.ipv4.ip_forward of the namespace at nsPath.
func writeIPForward(nsPath, v string) error {
	err := inNetNS(nsPath, func() error { return os.WriteFile(ipForwardPath(), []byte(v+"\n"), 0o644) })
	if err != nil {
		return fmt.Errorf("set ip_forward=%s: %w", v, err)
	}
	return nil
}
