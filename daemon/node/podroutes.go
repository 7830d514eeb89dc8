package node

import (
	"context"
	"log/slog"
	"net"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/cluster"
	"github.com/osdcloud/osd/netsetup"
)

// PodRoutes is the routes this node needs (pure): every other node's pod CIDRs via its
// first IPv4 InternalIP; nodes without either are skipped. Sorted by destination.
func PodRoutes(self string, nodes []corev1.Node) []netsetup.PodRoute {
	var out []netsetup.PodRoute
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
			out = append(out, netsetup.PodRoute{Dst: ipnet.String(), Via: via})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Dst < out[j].Dst })
	return out
}

// keepPodRoutes keeps the pod routes to the other nodes current until ctx ends (every
// 10 s, every second until this node has a pod CIDR; a node joining or leaving is picked
// up by the next pass) and hands the control nodes' sources (ControlSources) to
// onControl (when not nil). client returns a
// Kubernetes client that can list nodes, or nil while there is none yet.
func keepPodRoutes(ctx context.Context, self string, client func() kubernetes.Interface, onControl func(context.Context, []string)) {
	for {
		interval := time.Second
		if cs := client(); cs != nil {
			lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			nodes, err := cs.CoreV1().Nodes().List(lctx, metav1.ListOptions{})
			cancel()
			if err == nil {
				if n, err := netsetup.SyncPodRoutes(PodRoutes(self, nodes.Items)); err != nil {
					slog.Error("pod routes", "err", err)
				} else if n > 0 {
					slog.Info("pod routes to other nodes updated", "changed", n)
				}
				if onControl != nil {
					onControl(ctx, ControlSources(nodes.Items))
				}
				if hasPodCIDR(self, nodes.Items) {
					interval = 10 * time.Second
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

func hasPodCIDR(self string, nodes []corev1.Node) bool {
	for _, n := range nodes {
		if n.Name == self {
			return n.Spec.PodCIDR != "" || len(n.Spec.PodCIDRs) > 0
		}
	}
	return false
}

// ControlSources are the addresses (InternalIP, ExternalIP) and pod CIDRs of the nodes
// that carry the control role's labels (pure; cluster.RoleLabels: labels a kubelet cannot
// set on its own Node, so a compute node cannot make itself a control source), sorted.
func ControlSources(nodes []corev1.Node) []string {
	want, err := cluster.RoleLabels([]string{api.RoleControl})
	if err != nil || len(want) == 0 {
		return nil
	}
	var out []string
	for _, n := range nodes {
		control := true
		for k, v := range want {
			if n.Labels[k] != v {
				control = false
			}
		}
		if !control {
			continue
		}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
				if ip := net.ParseIP(a.Address); ip != nil {
					out = append(out, ip.String())
				}
			}
		}
		cidrs := n.Spec.PodCIDRs
		if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
			cidrs = []string{n.Spec.PodCIDR}
		}
		for _, c := range cidrs {
			if _, ipnet, err := net.ParseCIDR(c); err == nil {
				out = append(out, ipnet.String())
			}
		}
	}
	sort.Strings(out)
	return out
}
