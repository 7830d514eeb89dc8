package node

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/osdcloud/osd/daemon/k3s"
)

// watch keeps the node state current (probed through the credentials load reads: the
// admin's on a server, the kubelet's on an agent), writes the pod network configuration
// once the node has a pod CIDR, keeps the routes to the other nodes' pods, and stops the
// daemon when k3s or containerd end on their own.
func (n *Node) watch(what, waiting string, load func(k3s.Paths) (*rest.Config, error)) {
	n.supervise(what)
	client := cachedClient(func() kubernetes.Interface { return probeClient(load, n.cfg.Paths) })
	go keepPodRoutes(n.ctx, n.cfg.NodeName, client, n.hooks.ControlSources)
	go func() {
		interval := time.Second
		for {
			st := k3s.NodeState{Reason: waiting}
			if cs := client(); cs != nil {
				pctx, cancel := context.WithTimeout(n.ctx, 5*time.Second)
				st = k3s.Probe(pctx, cs, n.cfg.NodeName, n.started)
				cancel()
			}
			if st.PodCIDR != "" {
				if wrote, err := k3s.EnsureCNIConfig(n.cfg.Paths, st.PodCIDR); err != nil {
					slog.Error("pod network config", "err", err)
				} else if wrote {
					slog.Info("wrote pod network config", "pod_cidr", st.PodCIDR)
				}
			}
			prev := n.state.Swap(&st)
			if prev.NodeReady != st.NodeReady || prev.APIReady != st.APIReady {
				slog.Info("kubernetes state", "api_ready", st.APIReady, "node_ready", st.NodeReady, "reason", st.Reason,
					"since_start", time.Since(n.started).Round(time.Millisecond))
			}
			if st.NodeReady {
				interval = 5 * time.Second
			}
			select {
			case <-n.ctx.Done():
				return
			case <-time.After(interval):
			}
		}
	}()
}

// probeClient is a client with a 5 s timeout from the kubeconfig load reads, nil until
// k3s wrote it.
func probeClient(load func(k3s.Paths) (*rest.Config, error), p k3s.Paths) kubernetes.Interface {
	rc, err := load(p)
	if err != nil {
		return nil
	}
	rc.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil
	}
	return cs
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
