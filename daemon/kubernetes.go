package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/bootstrap/images/ctrimport"
	"github.com/osdcloud/osd/daemon/k3s"
)

// configSysctls is the store key of the kernel settings recorded before k3s first changed
// them, restored by reset.
const configSysctls = "host.original_sysctls"

func (d *Daemon) k3sConfig() k3s.Config {
	return k3s.Config{Paths: d.cfg.paths(), NodeName: d.cfg.NodeName, NodeIP: d.cfg.NodeIP}.WithDefaults()
}

// ensureKubernetes is the converge step that starts the embedded Kubernetes once per
// daemon process (k3s cannot run twice in one process).
func (d *Daemon) ensureKubernetes(ctx context.Context) (bool, string, error) {
	d.k8sOnce.Lock()
	defer d.k8sOnce.Unlock()
	if d.server != nil {
		return false, "running", nil
	}
	if err := d.startKubernetes(ctx); err != nil {
		return false, "", err
	}
	d.watchKubernetes(d.runCtx)
	return true, "containerd and k3s started", nil
}

// startKubernetes writes the files k3s needs, starts containerd, makes sure the pause image
// is present, and starts the embedded k3s server.
func (d *Daemon) startKubernetes(ctx context.Context) error {
	kc := d.k3sConfig()
	if err := k3s.Prepare(kc, d.cfg.Self); err != nil {
		return err
	}
	logf, err := os.OpenFile(kc.LogDir()+"/containerd.log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open containerd log: %w", err)
	}
	d.onStop(func(context.Context) error { return logf.Close() })
	if err := ensureSharedNetnsDir(); err != nil {
		return err
	}
	t0 := time.Now()
	cd, err := k3s.StartContainerd(ctx, kc, d.cfg.Self, logf, 30*time.Second)
	if err != nil {
		return err
	}
	d.containerd = cd
	slog.Info("containerd running", "socket", kc.ContainerdSocket(), "took", time.Since(t0).Round(time.Millisecond))

	if err := d.ensurePauseImage(ctx, kc); err != nil {
		cd.Stop(ctx, false)
		d.containerd = nil
		return err
	}
	srv, err := k3s.StartServer(kc)
	if err != nil {
		return err
	}
	d.server = srv
	return nil
}

// ensurePauseImage imports the pod sandbox image osd builds itself, unless present.
func (d *Daemon) ensurePauseImage(ctx context.Context, kc k3s.Config) error {
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

// watchKubernetes keeps the node state current and writes the pod network configuration
// once the node has a pod CIDR. If k3s or containerd end on their own, it reports that on
// d.failed, which stops the daemon (its supervisor restarts it).
func (d *Daemon) watchKubernetes(ctx context.Context) {
	kc := d.k3sConfig()
	d.watchNode(ctx, kc, "embedded k3s", "waiting for the API server to write its kubeconfig",
		func() kubernetes.Interface { return probeClient(k3s.RESTConfig, kc.Paths) })
}

// probeClient is a client with a 5 s timeout from the kubeconfig load reads (the admin's
// or the kubelet's), nil until k3s wrote it.
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

// watchNode is the watcher of a server (watchKubernetes) and of an agent (watchAgent):
// pod routes to the other nodes, the node state probed through newClient (nil until its
// credentials exist) with the pod network configuration written once the node has a pod
// CIDR, and d.failed told when k3s (what) or containerd end on their own.
func (d *Daemon) watchNode(ctx context.Context, kc k3s.Config, what, waiting string, newClient func() kubernetes.Interface) {
	srv, cd := d.server, d.containerd
	go keepPodRoutes(ctx, kc.NodeName, cachedClient(newClient))
	go func() {
		var why error
		select {
		case <-srv.Done():
			why = fmt.Errorf("%s stopped unexpectedly: %v", what, srv.Err())
		case <-cd.Exited():
			why = errors.New("containerd exited unexpectedly; see " + kc.LogDir() + "/containerd.log")
		case <-ctx.Done():
			return
		}
		select {
		case d.failed <- why:
		default:
		}
	}()
	go func() {
		var cs kubernetes.Interface
		interval := time.Second
		for {
			if cs == nil {
				cs = newClient()
			}
			st := k3s.NodeState{Reason: waiting}
			if cs != nil {
				pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				st = k3s.Probe(pctx, cs, kc.NodeName)
				cancel()
			}
			if st.PodCIDR != "" {
				if wrote, err := k3s.EnsureCNIConfig(kc.Paths, st.PodCIDR); err != nil {
					slog.Error("pod network config", "err", err)
				} else if wrote {
					slog.Info("wrote pod network config", "pod_cidr", st.PodCIDR)
				}
			}
			prev := d.kube.Swap(&st)
			if prev.NodeReady != st.NodeReady || prev.APIReady != st.APIReady {
				slog.Info("kubernetes state", "api_ready", st.APIReady, "node_ready", st.NodeReady, "reason", st.Reason, "since_start", time.Since(d.started).Round(time.Millisecond))
			}
			if st.NodeReady {
				interval = 5 * time.Second
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(interval):
			}
		}
	}()
}
