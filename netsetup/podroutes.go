package netsetup

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
)

// Pods on different nodes reach each other (and host-network pods such as nova-compute
// reach Services whose endpoints run on another node) through plain routes: each node's pod
// CIDR via that node's address, as flannel's host-gw backend does. When a node's address is
// not on a network this host is on, the route goes through the next hop this host uses to
// reach that address (a router that must know the way on, as the other node itself does
// when it is that router).

// podRouteProtocol marks the routes osd adds (rtnetlink protocol numbers above 4 are free
// for routing daemons), so stale ones can be found and removed.
const podRouteProtocol = netlink.RouteProtocol(0x4f)

// PodRoute is the pod CIDR of another node and the address it is reached through.
type PodRoute struct {
	Dst string // pod CIDR, e.g. 10.42.1.0/24
	Via string // the node's address
}

// SyncPodRoutes makes the host's pod routes (the ones osd marks as its own) equal want:
// replaces what differs, deletes what is no longer wanted. It returns how many routes it
// changed.
func SyncPodRoutes(want []PodRoute) (int, error) {
	h, err := netlink.NewHandle()
	if err != nil {
		return 0, fmt.Errorf("pod routes: netlink: %w", err)
	}
	defer h.Close()
	return syncPodRoutes(h, want)
}

// RemovePodRoutes deletes every route osd added to other nodes' pod networks (osd reset).
func RemovePodRoutes() (int, error) { return SyncPodRoutes(nil) }

func syncPodRoutes(h *netlink.Handle, want []PodRoute) (int, error) {
	have, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: podRouteProtocol}, netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return 0, fmt.Errorf("list pod routes: %w", err)
	}
	current := map[string]string{}
	for _, r := range have {
		if r.Dst != nil && r.Gw != nil {
			current[r.Dst.String()] = r.Gw.String()
		}
	}
	changed := 0
	wanted := map[string]bool{}
	for _, w := range want {
		wanted[w.Dst] = true
		w.Via = nextHop(h, w.Via)
		if current[w.Dst] == w.Via {
			continue
		}
		_, dst, err := net.ParseCIDR(w.Dst)
		if err != nil {
			return changed, fmt.Errorf("route %s: %w", w.Dst, err)
		}
		if err := h.RouteReplace(&netlink.Route{Dst: dst, Gw: net.ParseIP(w.Via), Protocol: podRouteProtocol}); err != nil {
			return changed, fmt.Errorf("route %s via %s: %w", w.Dst, w.Via, err)
		}
		changed++
	}
	for _, r := range have {
		if r.Dst != nil && !wanted[r.Dst.String()] {
			if err := h.RouteDel(&r); err != nil {
				return changed, fmt.Errorf("remove stale route %s: %w", r.Dst, err)
			}
			changed++
		}
	}
	return changed, nil
}

// nextHop is the address to route through to reach via: via itself when it is on one of
// this host's networks, else the gateway of the route the kernel would take to it.
func nextHop(h *netlink.Handle, via string) string {
	ip := net.ParseIP(via)
	if ip == nil {
		return via
	}
	rs, err := h.RouteGet(ip)
	if err != nil || len(rs) == 0 || rs[0].Gw == nil {
		return via
	}
	return rs[0].Gw.String()
}
