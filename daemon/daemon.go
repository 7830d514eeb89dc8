// Package daemon is osd's composition root: it owns the daemon's lifecycle (Run blocks,
// Ready says when the API answers, one ordered stop) and wires the state store, the REST
// API, the embedded Kubernetes and the host preparation together. Only cmd imports it.
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

	"github.com/osdcloud/osd/bootstrap/deploy"
	"github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/cluster"
	"github.com/osdcloud/osd/daemon/k3s"
	"github.com/osdcloud/osd/daemon/rest"
	"github.com/osdcloud/osd/daemon/store"
	"github.com/osdcloud/osd/netsetup"
)

// Defaults for a host install.
const (
	DefaultStateDir = "/var/lib/osd"
	DefaultRunDir   = "/run/osd"
	// DefaultCacheDir keeps built images and downloaded packages; osd reset leaves it,
	// so a host set up again does not rebuild what it had.
	DefaultCacheDir = "/var/cache/osd"
)

// Config is how a daemon is started.
type Config struct {
	StateDir string
	RunDir   string
	CacheDir string // image store and package cache
	Socket   string // default RunDir/osd.sock
	NodeName string // default the host name
	NodeIP   string
	// KeepWorkloads leaves pod containers running when the daemon stops.
	KeepWorkloads bool
	// Self is the osd executable (default os.Executable()).
	Self string
	// External is the external network behind br-ex (default: isolated and NATed).
	External netsetup.ExternalNetwork
	// VolumeGroupBytes sizes the loop-backed cinder-volumes group (default 20 GiB).
	VolumeGroupBytes int64
	// HTTPSAddress is the remote API's listen address (default :8443; "none" disables it).
	HTTPSAddress string
	// CgroupRoot is the kubelet's cgroup root (default: env OSD_CGROUP_ROOT, else the
	// hierarchy's root). Only for several nodes on one host, such as the cluster tests.
	CgroupRoot string
	// AgentTokenTTL is how long a joining node's k3s agent credential lives (default
	// DefaultAgentTokenTTL).
	AgentTokenTTL time.Duration
	// MemberCertLifetime is how long the member certificates this daemon issues last
	// (default cluster.MemberCertLifetime; members renew at half of it).
	MemberCertLifetime time.Duration
}

// WithDefaults fills the zero fields of c.
func (c Config) WithDefaults() (Config, error) {
	if c.StateDir == "" {
		c.StateDir = DefaultStateDir
	}
	if c.RunDir == "" {
		c.RunDir = DefaultRunDir
	}
	if c.CacheDir == "" {
		c.CacheDir = DefaultCacheDir
	}
	if c.Socket == "" {
		c.Socket = filepath.Join(c.RunDir, "osd.sock")
	}
	for _, p := range []*string{&c.StateDir, &c.RunDir, &c.CacheDir, &c.Socket} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return c, err
		}
		*p = abs
	}
	if c.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return c, fmt.Errorf("node name: %w", err)
		}
		c.NodeName = h
	}
	if c.HTTPSAddress == "" {
		c.HTTPSAddress = DefaultHTTPSAddress
	}
	if c.CgroupRoot == "" {
		c.CgroupRoot = os.Getenv("OSD_CGROUP_ROOT")
	}
	if c.VolumeGroupBytes == 0 {
		c.VolumeGroupBytes = 20 << 30
	}
	if c.AgentTokenTTL != 0 && (c.AgentTokenTTL < time.Minute || c.AgentTokenTTL > 24*time.Hour) {
		return c, fmt.Errorf("agent token lifetime %s is out of range, want between 1m and 24h", c.AgentTokenTTL)
	}
	if c.MemberCertLifetime != 0 && c.MemberCertLifetime < time.Minute {
		return c, fmt.Errorf("member certificate lifetime %s is too short, want at least 1m (members renew at half of it)", c.MemberCertLifetime)
	}
	if _, err := c.External.Normalize(); err != nil {
		return c, err
	}
	if c.Self == "" {
		self, err := os.Executable()
		if err != nil {
			return c, fmt.Errorf("find own executable: %w", err)
		}
		c.Self = self
	}
	return c, nil
}

func (c Config) paths() k3s.Paths {
	return k3s.Paths{StateDir: c.StateDir, RunDir: c.RunDir, CgroupRoot: c.CgroupRoot}
}

// Daemon is one running osd daemon.
type Daemon struct {
	cfg     Config
	started time.Time
	ready   chan struct{}
	state   atomic.Value // string: api.StateStarting, ...
	kube    atomic.Pointer[k3s.NodeState]

	db         *store.DB
	containerd *k3s.Containerd
	server     *k3s.Server
	k8sOnce    sync.Mutex
	failed     chan error // a supervised part ended on its own

	runCtx context.Context // ends when the daemon stops

	ctrlMu         sync.Mutex // one controller pass at a time
	ctrl           *deploy.Controller
	kc             *kubeClients
	reconcilerOnce sync.Once

	trust      *cluster.TrustSet
	clusterSvc *cluster.Service
	httpsAddr  string

	builderOnce sync.Once
	imgBuilder  *images.Builder
	imagesBusy  sync.Mutex // one image build or import at a time
	ops         operations
	conv        converger
	join        joiner
	countVMs    VMCounter      // nil: pods labelled InstanceLabel (see members.go)
	wg          sync.WaitGroup // background work that stop waits for

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
	d := &Daemon{cfg: cfg, ready: make(chan struct{}), failed: make(chan error, 1)}
	d.conv.state.State = "idle"
	d.state.Store(api.StateStarting)
	d.kube.Store(&k3s.NodeState{Reason: "embedded Kubernetes not started yet"})
	return d, nil
}

// Ready is closed once the API answers.
func (d *Daemon) Ready() <-chan struct{} { return d.ready }

// Run starts the daemon and blocks until ctx ends or a part fails, then stops everything
// it started (in the order stop explains).
func (d *Daemon) Run(ctx context.Context) (err error) {
	d.started = time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d.runCtx = ctx
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
	d.db = db
	d.onStop(func(context.Context) error { return db.Close() })

	if err := d.startRemote(ctx); err != nil {
		return err
	}
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
	close(d.ready)
	slog.Info("osd daemon listening", "socket", d.cfg.Socket, "state_dir", d.cfg.StateDir, "version", api.Version)

	d.state.Store(api.StateRunning)
	if v, _, err := db.GetConfig(ctx, configInitialized); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return err
	} else if v == "true" {
		slog.Info("host was initialized before: converging it")
		d.startConverge(ctx)
	}
	d.resumeJoin(ctx)

	select {
	case <-ctx.Done():
		slog.Info("osd daemon stopping")
		return nil
	case err := <-d.failed:
		return err
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
		d.state.Store(api.StateStopping)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if d.containerd != nil {
			errs = append(errs, d.containerd.Stop(ctx, d.cfg.KeepWorkloads))
		}
		d.undoMu.Lock()
		for i := len(d.undo) - 1; i >= 0; i-- {
			if err := d.undo[i](ctx); err != nil {
				errs = append(errs, err)
			}
		}
		d.undo = nil
		d.undoMu.Unlock()
		if d.server != nil {
			if err := errors.Join(errs...); err != nil {
				slog.Error("osd daemon stop", "err", err)
			}
			slog.Info("osd daemon stopped; stopping the embedded Kubernetes")
			errs = append(errs, d.server.Stop(90*time.Second))
		}
	})
	return errors.Join(errs...)
}

// info is the answer to GET /1.0.
func (d *Daemon) info() api.ServerInfo {
	k := d.kube.Load()
	return api.ServerInfo{
		Version:   api.Version,
		State:     d.state.Load().(string),
		StateDir:  d.cfg.StateDir,
		StartedAt: d.started,
		Uptime:    time.Since(d.started).Round(time.Second).String(),
		Kubernetes: api.KubernetesStatus{
			APIReady:  k.APIReady,
			NodeName:  d.cfg.NodeName,
			NodeReady: k.NodeReady,
			Reason:    k.Reason,
		},
	}
}
