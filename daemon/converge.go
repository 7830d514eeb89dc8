package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/osdcloud/osd/bootstrap"
	"github.com/osdcloud/osd/bootstrap/preflight"
	"github.com/osdcloud/osd/daemon/k3s"
	"github.com/osdcloud/osd/daemon/rest"
	"github.com/osdcloud/osd/hypervisor"
	"github.com/osdcloud/osd/netsetup"
)

// configInitialized marks a host on which `osd init` was asked for: from then on the
// daemon converges the host at every start (after a reboot nothing else brings OVS, the
// external network or the loop-backed volume group back).
const configInitialized = "init.requested"

// configGoal is how far converge goes: goalOpenStack (default) or goalKubernetes.
const (
	configGoal     = "init.goal"
	goalOpenStack  = "openstack"
	goalKubernetes = "kubernetes"
)

// configVirtType is the hypervisor type the last preflight chose (kvm or qemu); nova-compute
// is configured with it.
const configVirtType = "hypervisor.virt_type"

// InitRequest is the body of POST /1.0/init.
type InitRequest struct {
	// KubernetesOnly stops after the embedded Kubernetes node is Ready (no OpenStack).
	KubernetesOnly bool `json:"kubernetes_only,omitempty"`
	// ExternalInterface moves this host NIC into br-ex (guarded by a connectivity check
	// that rolls back) instead of the default isolated, NATed external network.
	ExternalInterface string `json:"external_interface,omitempty"`
	// ExternalCIDR is the isolated external network (default 172.24.4.0/24).
	ExternalCIDR string `json:"external_cidr,omitempty"`
}

// external is the external network to converge to: what the last osd init asked for,
// else the daemon's configuration.
func (d *Daemon) external(ctx context.Context) (netsetup.ExternalNetwork, error) {
	ext := d.cfg.External
	if v, ok, err := d.db.GetConfig(ctx, configExternalWanted); err != nil {
		return ext, err
	} else if ok {
		if err := json.Unmarshal([]byte(v), &ext); err != nil {
			return ext, fmt.Errorf("stored external network: %w", err)
		}
	}
	return ext.Normalize()
}

// configExternalWanted is the external network osd init asked for.
const configExternalWanted = "init.external_network"

// InitState is the progress of the current (or last) converge run, as GET /1.0/init
// answers it.
type InitState struct {
	State    string               `json:"state"` // idle, running, succeeded, failed
	Run      string               `json:"run,omitempty"`
	Started  time.Time            `json:"started,omitzero"`
	Finished time.Time            `json:"finished,omitzero"`
	Steps    []bootstrap.Event    `json:"steps,omitempty"`
	Detail   string               `json:"detail,omitempty"` // what the running step is doing now
	Error    string               `json:"error,omitempty"`
	Findings []preflight.Finding  `json:"findings,omitempty"`
	Decision *preflight.Decisions `json:"decisions,omitempty"`
	// Dashboard is Horizon's address once the cloud is up (login: the admin credentials).
	Dashboard string `json:"dashboard,omitempty"`
}

// converger runs at most one converge at a time and remembers the last one.
type converger struct {
	mu      sync.Mutex
	running bool
	state   InitState
}

func (c *converger) snapshot() InitState {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.state
	s.Steps = append([]bootstrap.Event(nil), s.Steps...)
	return s
}

func (c *converger) update(f func(*InitState)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(&c.state)
}

// startConverge starts a converge run unless one is running; it reports whether it did.
func (d *Daemon) startConverge(ctx context.Context) bool {
	c := &d.conv
	c.mu.Lock()
	if c.running {
		c.mu.Unlock()
		return false
	}
	c.running = true
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	c.state = InitState{State: "running", Run: run, Started: time.Now()}
	c.mu.Unlock()
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		err := d.converge(ctx, run)
		c.mu.Lock()
		defer c.mu.Unlock()
		c.running = false
		c.state.Finished = time.Now()
		if err != nil {
			c.state.State, c.state.Error = "failed", err.Error()
			slog.Error("converge failed", "run", run, "err", err)
			return
		}
		c.state.State = "succeeded"
		slog.Info("host converged", "run", run, "took", time.Since(c.state.Started).Round(time.Millisecond))
	}()
	return true
}

// converge runs preflight, then the host preparation steps, then Kubernetes.
func (d *Daemon) converge(ctx context.Context, run string) error {
	rep, err := preflight.Run(ctx, d.preflightConfig(), preflight.DefaultRequirements())
	if err != nil && len(rep.Findings) == 0 {
		return fmt.Errorf("preflight: %w", err)
	}
	d.conv.update(func(s *InitState) { s.Findings, s.Decision = rep.Findings, &rep.Decisions })
	if rep.Failed {
		return errors.New("preflight failed: fix the failed checks (osd preflight shows them) and run osd init again")
	}
	// Kernel settings as they were before osd touched anything, for reset (first run only).
	if _, ok, err := d.db.GetConfig(ctx, configSysctls); err != nil {
		return err
	} else if !ok {
		b, _ := json.Marshal(k3s.ReadSysctls())
		if err := d.db.SetConfig(ctx, configSysctls, string(b)); err != nil {
			return fmt.Errorf("record sysctls: %w", err)
		}
	}
	goal, _, err := d.db.GetConfig(ctx, configGoal)
	if err != nil {
		return err
	}
	if err := d.db.SetConfig(ctx, configVirtType, rep.Decisions.VirtType); err != nil {
		return fmt.Errorf("record virt_type: %w", err)
	}
	steps := d.plan(rep.Decisions, goal != goalKubernetes)
	return bootstrap.Execute(ctx, d.db, run, steps, func(e bootstrap.Event) {
		d.conv.update(func(s *InitState) {
			s.Detail = ""
			if !e.Done {
				s.Steps = append(s.Steps, e)
				return
			}
			s.Steps[len(s.Steps)-1] = e
		})
		if e.Done {
			slog.Info("step", "step", e.Step, "changed", e.Changed, "took", e.Took.Round(time.Millisecond), "err", e.Error)
		}
	})
}

func (d *Daemon) preflightConfig() preflight.ProbeConfig {
	return preflight.ProbeConfig{StateDir: d.cfg.StateDir, RunDir: d.cfg.RunDir, SelfPIDs: []int{os.Getpid()}, SelfExe: d.cfg.Self}
}

// plan is the ordered list of idempotent steps that make this host an osd node.
func (d *Daemon) plan(dec preflight.Decisions, withOpenStack bool) []bootstrap.Step {
	ovs := netsetup.DefaultOVSConfig()
	ovs.Datapath = dec.OVSDatapath
	steps := []bootstrap.Step{
		{Name: "kvm-permissions", Run: func(ctx context.Context) (bool, string, error) {
			changed, err := hypervisor.EnsureKVMPermissions("/dev/kvm")
			return changed, "virt_type " + dec.VirtType + ": " + dec.VirtTypeReason, err
		}},
		{Name: "openvswitch", Run: func(ctx context.Context) (bool, string, error) {
			changed, err := netsetup.EnsureOVS(ctx, ovs)
			if err == nil {
				err = d.recordOwner(ctx, configOVSOwner, changed)
			}
			return changed, "datapath " + ovs.Datapath, err
		}},
		{Name: "external-network", Run: func(ctx context.Context) (bool, string, error) {
			ext, err := d.external(ctx)
			if err != nil {
				return false, "", err
			}
			spec := netsetup.Spec{Datapath: ovs.Datapath, External: ext}
			b, _ := json.Marshal(ext)
			if err := d.db.SetConfig(ctx, configExternal, string(b)); err != nil {
				return false, "", err
			}
			changed, err := netsetup.EnsureExternalNetwork(ctx, d.netHost(ovs), spec)
			detail := ext.Bridge + " " + ext.CIDR + " via " + ext.GatewayIP + " (NAT)"
			if ext.Interface != "" {
				detail = ext.Bridge + " with " + ext.Interface
			}
			return changed, detail, err
		}},
		{Name: "libvirt", Run: func(ctx context.Context) (bool, string, error) {
			started, err := hypervisor.EnsureLibvirtd(ctx, hypervisor.LibvirtConfig{})
			if err == nil {
				err = d.recordOwner(ctx, configLibvirtOwner, started)
			}
			if err != nil {
				return started, "", err
			}
			info, err := hypervisor.CheckLibvirt(ctx, hypervisor.DefaultLibvirtSocket)
			return started, fmt.Sprintf("libvirt %s, QEMU %s, domain types %v", info.LibVersion, info.HypervisorVersion, info.DomainTypes), err
		}},
		{Name: "volume-group", Run: func(ctx context.Context) (bool, string, error) {
			if dec.StorageBackend != "lvm" {
				return false, "skipped: " + dec.StorageBackendReason, nil
			}
			changed, err := hypervisor.EnsureVolumeGroup(ctx, d.vgSpec())
			return changed, "", err
		}},
	}
	steps = append(steps,
		bootstrap.Step{Name: "kubernetes", Run: d.ensureKubernetes},
		bootstrap.Step{Name: "kubernetes-node", Run: d.waitNodeReady},
		bootstrap.Step{Name: "node-roles", Run: d.labelNode},
	)
	if withOpenStack {
		steps = append(steps,
			bootstrap.Step{Name: "images", Run: d.ensureImages},
			bootstrap.Step{Name: "openstack", Run: d.ensureOpenStack},
			bootstrap.Step{Name: "day-one", Run: d.ensureDayOne},
		)
	}
	return steps
}

func (d *Daemon) netHost(ovs netsetup.OVSConfig) netsetup.Host {
	return netsetup.Host{OVSSocket: ovs.Socket(), StateDir: filepath.Join(d.cfg.StateDir, "host")}
}

func (d *Daemon) vgSpec() hypervisor.VGSpec {
	return hypervisor.VGSpec{Name: "cinder-volumes", BackingFile: filepath.Join(d.cfg.StateDir, "cinder-volumes.img"), SizeBytes: d.cfg.VolumeGroupBytes}
}

// waitNodeReady waits until the embedded node reports Ready.
func (d *Daemon) waitNodeReady(ctx context.Context) (bool, string, error) {
	for {
		k := d.kube.Load()
		if k.NodeReady {
			return false, "node " + d.cfg.NodeName + " Ready", nil
		}
		select {
		case <-ctx.Done():
			return false, "", fmt.Errorf("node %s not ready: %s", d.cfg.NodeName, k.Reason)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// postInit records that this host is to be an osd node and starts converging it.
func (d *Daemon) postInit(r *http.Request) rest.Response {
	var req InitRequest
	if err := rest.DecodeJSON(r, &req, 4096); err != nil {
		return rest.ErrorResponse(err)
	}
	if st, ok, err := d.db.GetConfig(r.Context(), configJoin); err != nil {
		return rest.ErrorResponse(err)
	} else if ok && st != joinRemoved {
		return rest.ErrorResponse(rest.Errorf(rest.ErrConflict, "this host is %s a cluster (osd join): osd init would make it a second, separate cloud; run osd reset first to leave", map[string]string{joinJoining: "joining", joinMember: "a member of"}[st]))
	}
	goal := goalOpenStack
	if req.KubernetesOnly {
		goal = goalKubernetes
	}
	if req.ExternalInterface != "" || req.ExternalCIDR != "" {
		ext, err := netsetup.ExternalNetwork{Interface: req.ExternalInterface, CIDR: req.ExternalCIDR}.Normalize()
		if err != nil {
			return rest.ErrorResponse(rest.Errorf(rest.ErrBadRequest, "%v", err))
		}
		if ext.Interface != "" {
			if _, err := net.InterfaceByName(ext.Interface); err != nil {
				return rest.ErrorResponse(rest.Errorf(rest.ErrBadRequest, "external interface %q: %v (ip link lists the host's interfaces)", ext.Interface, err))
			}
		}
		if cur, err := d.external(r.Context()); err == nil && cur != ext {
			if v, _, _ := d.db.GetConfig(r.Context(), configExternal); v != "" {
				return rest.ErrorResponse(rest.Errorf(rest.ErrConflict, "this host's external network is already %s %s%s: changing it needs osd reset first", cur.Bridge, cur.CIDR, cur.Interface))
			}
		}
		b, _ := json.Marshal(ext)
		if err := d.db.SetConfig(r.Context(), configExternalWanted, string(b)); err != nil {
			return rest.ErrorResponse(err)
		}
	}
	if err := d.db.SetConfig(r.Context(), configGoal, goal); err != nil {
		return rest.ErrorResponse(err)
	}
	if err := d.db.SetConfig(r.Context(), configInitialized, "true"); err != nil {
		return rest.ErrorResponse(err)
	}
	d.startConverge(d.runCtx)
	return rest.AsyncResponse("/1.0/init", d.conv.snapshot())
}

func (d *Daemon) getInit(*http.Request) rest.Response {
	return rest.SyncResponse(d.conv.snapshot())
}

func (d *Daemon) getPreflight(r *http.Request) rest.Response {
	rep, err := preflight.Run(r.Context(), d.preflightConfig(), preflight.DefaultRequirements())
	if err != nil && len(rep.Findings) == 0 {
		return rest.ErrorResponse(err)
	}
	return rest.SyncResponse(rep)
}
