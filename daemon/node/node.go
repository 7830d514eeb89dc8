// Package node owns this host's embedded Kubernetes node: containerd and the k3s server
// (osd init) or agent (osd join) in the daemon's process, the node's readiness as probed
// now, the pod network configuration and routes, the role labels, and the Kubernetes
// clients, built once.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/bootstrap/images/ctrimport"
	"github.com/osdcloud/osd/daemon/k3s"
	"github.com/osdcloud/osd/netsetup"
)

// Hooks are what the node needs of the daemon's lifecycle.
type Hooks struct {
	// OnStop registers an undo step run when the daemon stops.
	OnStop func(func(context.Context) error)
	// Fail stops the daemon because a supervised part (k3s, containerd) ended.
	Fail func(error)
	// ControlSources, when set, gets the control nodes' addresses and pod CIDRs
	// (ControlSources of the cluster's Nodes) each time the pod routes are brought up to
	// date (every 10 s, every second until this node has its pod CIDR).
	ControlSources func(context.Context, []string)
}

// Node is the embedded Kubernetes of this host. Start it once per process with
// EnsureServer or EnsureAgent (k3s cannot run twice in one process).
type Node struct {
	cfg     k3s.Config
	self    string          // the osd executable (containerd and the tools run from it)
	ctx     context.Context // the daemon's run context
	hooks   Hooks
	started time.Time

	mu         sync.Mutex // one start at a time
	server     *k3s.Server
	containerd *k3s.Containerd
	state      atomic.Pointer[k3s.NodeState]

	clientsMu sync.Mutex
	clients   *Clients
}

// New returns the node of cfg; nothing runs until EnsureServer or EnsureAgent.
func New(ctx context.Context, cfg k3s.Config, self string, hooks Hooks) *Node {
	n := &Node{cfg: cfg, self: self, ctx: ctx, hooks: hooks, started: time.Now()}
	n.state.Store(&k3s.NodeState{Reason: "embedded Kubernetes not started yet"})
	return n
}

// Config is the node's k3s configuration.
func (n *Node) Config() k3s.Config { return n.cfg }

// State is the node's readiness as last probed.
func (n *Node) State() k3s.NodeState { return *n.state.Load() }

// Running reports whether k3s (server or agent) was started in this process.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.server != nil
}

// ContainerdRunning reports whether containerd runs (images can be imported).
func (n *Node) ContainerdRunning() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.containerd != nil
}

// EnsureServer is the converge step that starts containerd and the k3s server, once.
func (n *Node) EnsureServer(ctx context.Context) (bool, string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.server != nil {
		return false, "running", nil
	}
	if err := n.startContainerd(ctx); err != nil {
		return false, "", err
	}
	srv, err := k3s.StartServer(n.cfg)
	if err != nil {
		return false, "", err
	}
	n.server = srv
	n.watch("embedded k3s", "waiting for the API server to write its kubeconfig", k3s.RESTConfig)
	return true, "containerd and k3s started", nil
}

// EnsureAgent is the join step that starts containerd and the k3s agent joining the
// server at serverURL with token, once; the node registers with taints (key=value:Effect).
func (n *Node) EnsureAgent(ctx context.Context, serverURL, token string, taints []string) (bool, string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.server != nil {
		return false, "running", nil
	}
	n.cfg.NodeTaints = taints
	if _, err := k3s.AgentArgs(n.cfg, serverURL, token); err != nil {
		return false, "", fmt.Errorf("the cluster's join information: %w", err)
	}
	if err := n.startContainerd(ctx); err != nil {
		return false, "", err
	}
	srv, err := k3s.StartAgent(n.cfg, serverURL, token)
	if err != nil {
		return false, "", err
	}
	n.server = srv
	n.watch("embedded k3s agent", "waiting for the k3s agent to join "+n.cfg.NodeName+" to the cluster", k3s.AgentRESTConfig)
	return true, fmt.Sprintf("containerd and the k3s agent started (server %s)", serverURL), nil
}

// startContainerd writes what k3s needs, starts containerd and makes sure the pause image
// is there.
func (n *Node) startContainerd(ctx context.Context) error {
	if err := k3s.Prepare(n.cfg, n.self); err != nil {
		return err
	}
	logf, err := os.OpenFile(n.cfg.LogDir()+"/containerd.log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open containerd log: %w", err)
	}
	n.hooks.OnStop(func(context.Context) error { return logf.Close() })
	if err := netsetup.EnsureSharedNetnsDir(); err != nil {
		return err
	}
	t0 := time.Now()
	cd, err := k3s.StartContainerd(ctx, n.cfg, n.self, logf, 30*time.Second)
	if err != nil {
		return err
	}
	slog.Info("containerd running", "socket", n.cfg.ContainerdSocket(), "took", time.Since(t0).Round(time.Millisecond))
	if err := ensurePauseImage(ctx, n.cfg); err != nil {
		cd.Stop(ctx, false)
		return err
	}
	n.containerd = cd
	return nil
}

// ensurePauseImage imports the pod sandbox image osd builds itself, unless present.
func ensurePauseImage(ctx context.Context, kc k3s.Config) error {
	if have, err := k3s.ImageDigest(ctx, kc.ContainerdSocket(), k3s.PauseImage); err != nil {
		return err
	} else if have != "" {
		return nil
	}
	img, err := images.PauseImage()
	if err != nil {
		return fmt.Errorf("build pause image: %w", err)
	}
	return ctrimport.Import(ctx, kc.ContainerdSocket(), img, k3s.PauseImage)
}

// WaitReady waits until the node reports Ready (the probe's view of now).
func (n *Node) WaitReady(ctx context.Context) (bool, string, error) {
	for {
		st := n.State()
		if st.NodeReady {
			return false, "node " + n.cfg.NodeName + " Ready", nil
		}
		select {
		case <-ctx.Done():
			return false, "", fmt.Errorf("node %s not ready: %s", n.cfg.NodeName, st.Reason)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// StopWorkloads stops containerd and, unless keep, the pods it runs. The daemon stops
// it first, so the kubelet cannot restart them.
func (n *Node) StopWorkloads(ctx context.Context, keep bool) error {
	n.mu.Lock()
	cd := n.containerd
	n.mu.Unlock()
	if cd == nil {
		return nil
	}
	return cd.Stop(ctx, keep)
}

// StopKubernetes stops the embedded k3s (last: its components end the process when they
// stop). It reports whether there was one.
func (n *Node) StopKubernetes(timeout time.Duration) (bool, error) {
	n.mu.Lock()
	srv := n.server
	n.mu.Unlock()
	if srv == nil {
		return false, nil
	}
	return true, srv.Stop(timeout)
}

// supervise stops the daemon (Hooks.Fail) when k3s or containerd end on their own.
func (n *Node) supervise(what string) {
	srv, cd := n.server, n.containerd
	go func() {
		var why error
		select {
		case <-srv.Done():
			why = fmt.Errorf("%s stopped unexpectedly: %v", what, srv.Err())
		case <-cd.Exited():
			why = errors.New("containerd exited unexpectedly; see " + n.cfg.LogDir() + "/containerd.log")
		case <-n.ctx.Done():
			return
		}
		n.hooks.Fail(why)
	}()
}
