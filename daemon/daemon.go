// Package daemon is osd's composition root: it owns the daemon's lifecycle (Run blocks,
// Ready says when the API answers, one ordered stop) and wires the resource packages
// together over one narrow state.State: the state store, the operations, the embedded
// Kubernetes node, and the REST API on the unix socket and over HTTPS. Only the osd
// daemon command imports it.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bimages "github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/cluster"
	"github.com/osdcloud/osd/daemon/converge"
	"github.com/osdcloud/osd/daemon/deployment"
	"github.com/osdcloud/osd/daemon/hostplan"
	"github.com/osdcloud/osd/daemon/images"
	"github.com/osdcloud/osd/daemon/join"
	"github.com/osdcloud/osd/daemon/launch"
	"github.com/osdcloud/osd/daemon/members"
	"github.com/osdcloud/osd/daemon/node"
	"github.com/osdcloud/osd/daemon/operations"
	"github.com/osdcloud/osd/daemon/rest"
	"github.com/osdcloud/osd/daemon/state"
	"github.com/osdcloud/osd/daemon/storage"
	"github.com/osdcloud/osd/daemon/store"
)

// Config is how a daemon is started (state.Config).
type Config = state.Config

// Defaults for a host install.
const (
	DefaultStateDir      = state.DefaultStateDir
	DefaultRunDir        = state.DefaultRunDir
	DefaultCacheDir      = state.DefaultCacheDir
	DefaultHTTPSAddress  = state.DefaultHTTPSAddress
	DefaultAgentTokenTTL = state.DefaultAgentTokenTTL
	// DefaultMemberCertLifetime is how long member certificates last unless configured.
	DefaultMemberCertLifetime = cluster.MemberCertLifetime
)

// Daemon is one running osd daemon.
type Daemon struct {
	cfg     Config
	started time.Time
	ready   chan struct{}
	status  atomic.Value // string: api.StateStarting, ...
	failed  chan error   // a supervised part ended on its own
	wg      sync.WaitGroup

	st         *state.State
	conv       *converge.Service
	images     *images.Service
	deployment *deployment.Service
	join       *join.Service
	members    *members.Service
	launch     *launch.Service
	storage    *storage.Service
	clusterSvc *cluster.Service
	trust      *cluster.TrustSet
	httpsAddr  string
	// wrapHooks, when set (tests), wraps the hooks the cluster's server side gets.
	wrapHooks func(cluster.Hooks) cluster.Hooks

	stopOnce sync.Once
	undoMu   sync.Mutex
	undo     []func(context.Context) error // run in reverse order at stop
}

// New makes a daemon from cfg; Run starts it.
func New(cfg Config) (*Daemon, error) {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	d := &Daemon{cfg: cfg, ready: make(chan struct{}), failed: make(chan error, 1), started: time.Now()}
	d.status.Store(api.StateStarting)
	return d, nil
}

// Ready is closed once the API answers.
func (d *Daemon) Ready() <-chan struct{} { return d.ready }

// wire makes the state every resource package shares and the resources themselves.
func (d *Daemon) wire(ctx context.Context, db *store.DB) {
	st := &state.State{Cfg: d.cfg, DB: db, Ctx: ctx, WG: &d.wg, Started: d.started, Stop: d.fail,
		Ops: operations.New(ctx, &d.wg)}
	st.Node = node.New(ctx, d.cfg.K3s(), d.cfg.Self, node.Hooks{OnStop: d.onStop, Fail: d.fail,
		// The control nodes (by their role labels) are the only sources of the firewall's
		// control-only ports.
		ControlSources: func(ctx context.Context, sources []string) {
			if err := hostplan.UpdateFirewallControl(ctx, st, sources); err != nil {
				slog.Error("firewall control sources", "err", err)
			}
		}})
	d.st = st
	d.storage = storage.New(st)
	d.images = images.New(st, d.storage.Images)
	// osd init's run is the one piece the init and deployment resources share: the
	// converge runs it, the deployment reads it and adds Horizon's address.
	run := state.NewInitRun()
	d.deployment = deployment.New(st, deployment.Deps{Init: run, Images: d.images, Storage: d.storage})
	d.conv = converge.New(st, converge.Deps{Run: run, Storage: d.storage, Images: d.images, Cloud: d.deployment})
	d.join = join.New(st, join.Deps{Address: d.ownAddress, Images: d.images})
	d.members = members.New(st, members.Deps{Cloud: d.deployment, Images: d.images, Address: d.ownAddress})
	d.launch = launch.New(st, d.deployment.CloudClient)
}

// Run starts the daemon and blocks until ctx ends or a part fails, then stops everything
// it started (in the order stop explains).
func (d *Daemon) Run(ctx context.Context) (err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer func() {
		cancel()
		d.wg.Wait()
		if stopErr := d.stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
	}()
	if err := os.MkdirAll(d.cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	unlock, err := lockStateDir(d.cfg.StateDir)
	if err != nil {
		return err
	}
	d.onStop(func(context.Context) error { unlock(); return nil })
	db, err := store.Open(ctx, filepath.Join(d.cfg.StateDir, "osd.db"))
	if err != nil {
		return fmt.Errorf("open state: %w", err)
	}
	d.onStop(func(context.Context) error { return db.Close() })
	d.wire(ctx, db)
	if n, err := db.CloseInterruptedSteps(ctx, "interrupted: the daemon stopped during this step"); err != nil {
		return err
	} else if n > 0 {
		slog.Warn("steps interrupted by the last stop, closed as failed in the journal", "count", n)
	}
	if err := d.startRemote(ctx); err != nil {
		return err
	}
	if err := d.serveUnix(); err != nil {
		return err
	}
	close(d.ready)
	d.notifyServiceManager(ctx)
	slog.Info("osd daemon listening", "socket", d.cfg.Socket, "state_dir", d.cfg.StateDir, "version", api.Version)
	d.status.Store(api.StateRunning)
	if err := d.conv.ResumeAtStart(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return err
	}
	d.join.ResumeAtStart(ctx)
	d.st.GoOnce("ovn-chassis-cert", func(ctx context.Context) { d.members.RunChassisCert(ctx, d.join.SignChassis) })
	select {
	case <-ctx.Done():
		slog.Info("osd daemon stopping")
		return nil
	case err := <-d.failed:
		return err
	}
}

// serveUnix serves the API on the root-only unix socket.
func (d *Daemon) serveUnix() error {
	l, err := rest.ListenUnix(d.cfg.Socket)
	if err != nil {
		return err
	}
	serveCtx, stopServe := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- rest.Serve(serveCtx, l, rest.NewRouter(d.endpoints())) }()
	d.onStop(func(context.Context) error {
		stopServe()
		err := <-served
		os.Remove(d.cfg.Socket)
		return err
	})
	return nil
}

// fail stops the daemon because of err (a supervised part ended, the node was removed).
func (d *Daemon) fail(err error) {
	select {
	case d.failed <- err:
	default:
	}
}

// onStop registers an undo step for stop.
func (d *Daemon) onStop(f func(context.Context) error) {
	d.undoMu.Lock()
	defer d.undoMu.Unlock()
	d.undo = append(d.undo, f)
}

// stop undoes everything Run did; it is idempotent. Order matters: containerd and the
// workloads first (so the kubelet cannot restart them), then the API, the store and the
// lock, and the embedded k3s last, because its components end the process when they stop.
func (d *Daemon) stop() error {
	var errs []error
	d.stopOnce.Do(func() {
		d.status.Store(api.StateStopping)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if d.st != nil {
			errs = append(errs, d.st.Node.StopWorkloads(ctx, d.keepWorkloads()))
		}
		d.undoMu.Lock()
		for i := len(d.undo) - 1; i >= 0; i-- {
			if err := d.undo[i](ctx); err != nil {
				errs = append(errs, err)
			}
		}
		d.undo = nil
		d.undoMu.Unlock()
		if d.st == nil {
			return
		}
		if err := errors.Join(errs...); err != nil {
			slog.Error("osd daemon stop", "err", err)
		}
		if ran, err := d.st.Node.StopKubernetes(90 * time.Second); ran {
			slog.Info("osd daemon stopped the embedded Kubernetes")
			errs = append(errs, err)
		}
	})
	return errors.Join(errs...)
}

// info is the answer to GET /1.0.
func (d *Daemon) info() api.ServerInfo {
	k := d.st.Node.State()
	host, _ := os.Hostname()
	rel, err := d.st.Release(context.Background())
	if err != nil {
		rel = bimages.Release{Name: "unknown", Debian: "?"}
		slog.Error("the host record's OpenStack release", "err", err)
	}
	var upgrade string
	if to, ok := bimages.UpgradeTarget(rel); ok { // a host asked for nothing has the default: none
		upgrade = to.Title()
	}
	return api.ServerInfo{
		Version:        api.Version,
		State:          d.status.Load().(string),
		StateDir:       d.cfg.StateDir,
		Hostname:       host,
		PID:            os.Getpid(),
		StartedAt:      d.started,
		Uptime:         time.Since(d.started).Round(time.Second).String(),
		OpenStack:      rel.Name,
		OpenStackTitle: rel.Title(),
		ReleaseUpgrade: upgrade,
		Kubernetes: api.KubernetesStatus{
			APIReady:  k.APIReady,
			NodeName:  d.cfg.NodeName,
			NodeReady: k.NodeReady,
			Reason:    k.Reason,
		},
	}
}
