package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Pods on different nodes reach each other (and host-network pods such as nova-compute
// reach Services whose endpoints run on another node) through plain routes: each node's pod
// CIDR via that node's address, as flannel's host-gw backend does. Nodes must share a layer-2
// network, which is what osd join expects of its members.

// podRouteProtocol marks the routes osd adds (rtnetlink protocol numbers above 4 are free
// for routing daemons), so stale ones can be found and removed.
const podRouteProtocol = netlink.RouteProtocol(0x4f)

// NodeRoute is the pod CIDR of another node and the address it is reached through.
type NodeRoute struct {
	Dst string // pod CIDR, e.g. 10.42.1.0/24
	Via string // the node's InternalIP
}

// PodRoutes is the routes this node needs (pure): every other node's pod CIDRs via its
// first IPv4 InternalIP; nodes without either are skipped. Sorted by destination.
func PodRoutes(self string, nodes []corev1.Node) []NodeRoute {
	var out []NodeRoute
	for _, n := range nodes {
		if n.Name == self {
			continue
		}
		via := ""
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				if ip := net.ParseIP(a.Address); ip != nil && ip.To4() != nil {
					via = ip.String()
					break
				}
			}
		}
		cidrs := n.Spec.PodCIDRs
		if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
			cidrs = []string{n.Spec.PodCIDR}
		}
		for _, c := range cidrs {
			_, ipnet, err := net.ParseCIDR(c)
			if err != nil || ipnet.IP.To4() == nil || via == "" {
				continue
			}
			out = append(out, NodeRoute{Dst: ipnet.String(), Via: via})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Dst < out[j].Dst })
	return out
}

// syncPodRoutes makes the host's routes marked podRouteProtocol equal want: replaces what
// differs, deletes what is no longer wanted. It returns how many routes it changed.
func syncPodRoutes(h *netlink.Handle, want []NodeRoute) (int, error) {
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
		if current[w.Dst] == w.Via {
			continue
		}
		_, dst, _ := net.ParseCIDR(w.Dst)
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

// keepPodRoutes keeps the pod routes to the other nodes current until ctx ends (every
// 10 s; a node joining or leaving is picked up by the next pass). client returns a
// Kubernetes client that can list nodes, or nil while there is none yet.
func keepPodRoutes(ctx context.Context, self string, client func() kubernetes.Interface) {
	h, err := netlink.NewHandle()
	if err != nil {
		slog.Error("pod routes: netlink", "err", err)
		return
	}
	defer h.Close()
	for {
		if cs := client(); cs != nil {
			lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			nodes, err := cs.CoreV1().Nodes().List(lctx, metav1.ListOptions{})
			cancel()
			if err == nil {
				if n, err := syncPodRoutes(h, PodRoutes(self, nodes.Items)); err != nil {
					slog.Error("pod routes", "err", err)
				} else if n > 0 {
					slog.Info("pod routes to other nodes updated", "changed", n)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Second):
		}
	}
}

// cachedClient returns make's client once make has returned one.
func cachedClient(make func() kubernetes.Interface) func() kubernetes.Interface {
	var cs kubernetes.Interface
	return func() kubernetes.Interface {
		if cs == nil {
			cs = make()
		}
		return cs
	}
}

// removePodRoutes deletes every route osd added to other nodes' pod networks (osd reset).
func removePodRoutes() (int, error) {
	h, err := netlink.NewHandle()
	if err != nil {
		return 0, err
	}
	defer h.Close()
	return syncPodRoutes(h, nil)
}
