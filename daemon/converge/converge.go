// Package converge is the daemon's init resource: POST /1.0/init records that this host is
// to be an osd node and converges it as an operation (preflight, the host preparation
// steps, the embedded Kubernetes, then what the deployment adds), GET /1.0/init follows
// the current or last run, GET /1.0/preflight and GET /1.0/journal tell what the host is
// and what was done to it. A host that was initialized is converged again at every start.
package converge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/osdcloud/osd/bootstrap"
	"github.com/osdcloud/osd/bootstrap/preflight"
	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/cluster"
	"github.com/osdcloud/osd/daemon/hostplan"
	"github.com/osdcloud/osd/daemon/k3s"
	"github.com/osdcloud/osd/daemon/node"
	"github.com/osdcloud/osd/daemon/operations"
	"github.com/osdcloud/osd/daemon/state"
	"github.com/osdcloud/osd/daemon/store"
)

// OperationKind is the kind of converge operations.
const OperationKind = "init"

// Deps are what the init resource is given when it is made.
type Deps struct {
	// Run is the run's state GET /1.0/init shows (the deployment is given the same).
	Run *state.InitRun
	// Storage checks and records osd init's storage choices, and decides the backend.
	Storage Storage
	// Images and Cloud add the steps of the full cloud after the host and its node, and
	// their part of a run's profile.
	Images Images
	Cloud  Cloud
}

// Storage is what a converge needs of the storage resource (storage.Service).
type Storage interface {
	// CheckRequest refuses osd init's storage choices the host cannot serve (400, 409).
	CheckRequest(ctx context.Context, req api.InitRequest, probe func(context.Context) preflight.Decisions) error
	// RecordRequest puts them into the host record h.
	RecordRequest(h *store.Host, req api.InitRequest)
	// Decide records this run's backend and size and updates dec to it.
	Decide(ctx context.Context, dec *preflight.Decisions, f preflight.Facts) error
}

// Images is what a converge needs of the image resource (images.Service): its steps
// (detail says what the running one does now) and its images' part of the profile.
type Images interface {
	Steps(detail func(string)) []bootstrap.Step
	Profile(since time.Time) []api.ImageProfile
}

// Cloud is what a converge needs of the deployment resource (deployment.Service): the
// cloud's steps and its releases' part of the profile.
type Cloud interface {
	Steps(detail func(string)) []bootstrap.Step
	Profile(since time.Time) []api.ReleaseProfile
}

// Service converges this host.
type Service struct {
	st      *state.State
	run     *state.InitRun
	storage Storage
	images  Images
	cloud   Cloud

	startMu sync.Mutex // one Start at a time
}

// New returns the converge resource of st.
func New(st *state.State, deps Deps) *Service {
	return &Service{st: st, run: deps.Run, storage: deps.Storage, images: deps.Images, cloud: deps.Cloud}
}

// Snapshot is the current or last converge run.
func (s *Service) Snapshot() api.InitState { return s.run.Snapshot() }

func (s *Service) update(f func(*api.InitState)) { s.run.Update(f) }

// Start starts a converge run as an operation unless one runs; it returns the run's
// operation either way. The run's state is running from the moment Start returns.
func (s *Service) Start() api.Operation { return s.start(RetryAsked) }

func (s *Service) start(retry bootstrap.Retry) api.Operation {
	s.startMu.Lock()
	defer s.startMu.Unlock()
	if op, ok := s.st.Ops.Running(OperationKind); ok {
		return op
	}
	s.update(func(c *api.InitState) { *c = api.InitState{State: api.ConvergeRunning, Started: time.Now()} })
	op, _ := s.st.Ops.Start(OperationKind, true, func(ctx context.Context, emit func(string)) (any, error) {
		k3s.TuneGC(true)
		defer k3s.TuneGC(false)
		s.update(func(c *api.InitState) { c.Operation = operations.ID(ctx) })
		run := strconv.FormatInt(time.Now().UnixNano(), 36)
		err := s.converge(ctx, run, retry, emit)
		s.update(func(c *api.InitState) {
			c.Finished, c.State = time.Now(), api.ConvergeSucceeded
			if err != nil {
				c.State, c.Error = api.ConvergeFailed, err.Error()
			}
		})
		if err != nil {
			slog.Error("converge failed", "run", run, "err", err)
			return s.Snapshot(), err
		}
		slog.Info("host converged", "run", run, "took", time.Since(s.Snapshot().Started).Round(time.Millisecond))
		return s.Snapshot(), nil
	})
	return op
}

// ResumeAtStart converges a host that was initialized before (after a reboot nothing
// else brings OVS, the external network or the loop-backed volume group back).
func (s *Service) ResumeAtStart(ctx context.Context) error {
	if h, err := s.st.Host(ctx); err != nil {
		return err
	} else if h.Initialized {
		slog.Info("host was initialized before: converging it")
		s.start(RetryAtBoot)
	}
	return nil
}

// Retries of a converge's failed steps: a run osd init asked for gives up on a step after
// a few attempts (the user sees why); the run at the daemon's start, with nobody there,
// keeps trying every failed step, backing off up to five minutes, while every step that
// does not need it goes on.
var (
	RetryAsked  = bootstrap.Retry{Attempts: 3, First: 5 * time.Second, Max: time.Minute}
	RetryAtBoot = bootstrap.Retry{First: 5 * time.Second, Max: 5 * time.Minute}
)

// converge runs preflight, then the plan.
func (s *Service) converge(ctx context.Context, run string, retry bootstrap.Retry, emit func(string)) error {
	s.update(func(c *api.InitState) { c.Run = run })
	spans := newStepSpans(s.Snapshot().Started)
	var needs map[string][]string
	defer func() {
		started := spans.start
		p := BuildProfile(spans.list(), needs, s.images.Profile(started), s.cloud.Profile(started))
		s.update(func(c *api.InitState) { c.Profile = p })
	}()
	t0 := time.Now()
	rep, err := preflight.Run(ctx, hostplan.PreflightConfig(s.st.Cfg), preflight.DefaultRequirements())
	spans.done(api.Step{Step: "preflight", Took: time.Since(t0)}, time.Now())
	if err != nil && len(rep.Findings) == 0 {
		return fmt.Errorf("preflight: %w", err)
	}
	dec := WireDecisions(rep.Decisions)
	s.update(func(c *api.InitState) { c.Findings, c.Decision = WireFindings(rep.Findings), &dec })
	if rep.Failed {
		return errors.New("preflight failed: fix the failed checks (osd preflight shows them) and run osd init again")
	}
	if err := s.storage.Decide(ctx, &rep.Decisions, rep.Facts); err != nil {
		return err
	}
	dec = WireDecisions(rep.Decisions)
	s.update(func(c *api.InitState) { c.Decision = &dec })
	if err := hostplan.RecordSysctls(ctx, s.st); err != nil {
		return err
	}
	h, err := s.st.Host(ctx)
	if err != nil {
		return err
	}
	if err := s.st.Set(ctx, state.KeyVirtType, rep.Decisions.VirtType); err != nil {
		return fmt.Errorf("record virt_type: %w", err)
	}
	detail := func(d string) { s.update(func(c *api.InitState) { c.Detail = d }) }
	steps := s.Plan(rep.Decisions, h.Goal != state.GoalKubernetes, detail)
	needs = map[string][]string{}
	for _, st := range steps {
		needs[st.Name] = append(append([]string(nil), st.Needs...), "preflight")
	}
	return bootstrap.ExecuteGraph(ctx, s.st.DB, run, steps, retry, func(e bootstrap.Event) {
		s.update(func(c *api.InitState) {
			c.Detail = ""
			c.Steps = SetStep(c.Steps, e)
		})
		if e.Done {
			spans.done(e, time.Now())
		}
		emit(hostplan.StepLine(e))
		if e.Done {
			slog.Info("step", "step", e.Step, "attempt", e.Attempt, "changed", e.Changed, "took", e.Took.Round(time.Millisecond), "err", e.Error, "retry_in", e.RetryIn)
		}
	})
}

// SetStep records the latest attempt of e's step in steps, kept in plan order (pure).
func SetStep(steps []api.Step, e api.Step) []api.Step {
	for i := range steps {
		if steps[i].Step == e.Step {
			steps[i] = e
			return steps
		}
	}
	steps = append(steps, e)
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].Index < steps[j].Index })
	return steps
}

// Plan is the converge's steps: the host's, the node's, and with the cloud the images'
// and the deployment's. Each needs only what it really uses, so a failing step (libvirt at boot) holds
// up nothing else (Kubernetes and the control plane).
func (s *Service) Plan(dec preflight.Decisions, withCloud bool, detail func(string)) []bootstrap.Step {
	steps := append(hostplan.HostSteps(s.st, dec, nil), s.nodeSteps(detail)...)
	if withCloud {
		steps = append(append(steps, s.images.Steps(detail)...), s.cloud.Steps(detail)...)
	}
	return steps
}

// nodeSteps start the embedded Kubernetes server once the host firewall is in place, wait
// for its node (detail says why it is not ready yet) and label it with every role (a
// single node is everything).
func (s *Service) nodeSteps(detail func(string)) []bootstrap.Step {
	n := s.st.Node
	return []bootstrap.Step{
		{Name: "kubernetes", Needs: []string{hostplan.StepFirewall}, Run: n.EnsureServer},
		{Name: "kubernetes-node", Needs: []string{"kubernetes"}, Run: func(ctx context.Context) (bool, string, error) { return WaitNodeReady(ctx, n, detail) }},
		{Name: "node-roles", Needs: []string{"kubernetes-node"}, Run: func(ctx context.Context) (bool, string, error) {
			cs, err := n.Admin()
			if err != nil {
				return false, "", err
			}
			return node.LabelRoles(ctx, cs, s.st.Cfg.NodeName, cluster.ValidRoles)
		}},
	}
}

// WaitNodeReady waits until the node reports Ready, saying meanwhile why it is not.
func WaitNodeReady(ctx context.Context, n *node.Node, detail func(string)) (bool, string, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for wctx.Err() == nil {
			detail(n.State().Reason)
			select {
			case <-wctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	return n.WaitReady(ctx)
}
