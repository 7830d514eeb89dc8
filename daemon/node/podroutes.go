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
// 10 s; a node joining or leaving is picked up by the next pass). client returns a
// Kubernetes client that can list nodes, or nil while there is none yet.
func keepPodRoutes(ctx context.Context, self string, client func() kubernetes.Interface) {
	for {
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
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Second):
		}
	}
}
