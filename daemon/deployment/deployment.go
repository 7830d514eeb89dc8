// Package deployment is the daemon's OpenStack resource: the OpenStackDeployment osd asks
// for (its spec and NodePorts from the service catalog), the one deployment controller
// driving it (the converge step that waits for every release to be Ready, then keeps
// reconciling), the admin credentials, the day-one resources, and the routes that show
// the deployment and a service's rendered values.
package deployment

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/osdcloud/osd/bootstrap"
	"github.com/osdcloud/osd/bootstrap/fsutil"
	"github.com/osdcloud/osd/charts"
	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/deploy"
	"github.com/osdcloud/osd/daemon/node"
	"github.com/osdcloud/osd/daemon/openstack"
	"github.com/osdcloud/osd/daemon/state"
)

// resync is how often the running controller looks at a ready deployment.
const resync = time.Minute

// Deps are what the deployment resource is given when it is made.
type Deps struct {
	// Init is osd init's run (state.InitRun): how far it is, and where Horizon's address goes.
	Init Init
	// Images says which images can be used yet.
	Images Images
	// Storage adds the block storage part of the spec.
	Storage Storage
}

// Init is what the deployment needs of osd init's run (state.InitRun, which the init
// resource runs).
type Init interface {
	// Snapshot says how far osd init is (for the reason the cloud cannot be used yet).
	Snapshot() api.InitState
	// SetDashboard is told Horizon's address once the cloud is up.
	SetDashboard(url string)
}

// Images is what the deployment needs of the image resource (images.Service).
type Images interface {
	// Wait says why an image cannot be used yet ("" when it is in containerd): the
	// controller holds the services that run from it.
	Wait(image string) string
	// Failed is why the images cannot be made ready (nil while they can).
	Failed() error
}

// Storage is what the deployment needs of the storage resource (storage.Service).
type Storage interface {
	// ApplySpec adds this host's block storage to spec; keystoneURL is Keystone's public
	// address, cinderURL Cinder's public endpoint.
	ApplySpec(ctx context.Context, spec *deploy.DeploymentSpec, keystoneURL, cinderURL string) error
}

// Service is the deployment resource of one daemon.
type Service struct {
	st      *state.State
	init    Init
	images  Images
	storage Storage

	ctrlOnce sync.Once
	ctrl     *deploy.Controller
	ctrlP    atomic.Pointer[deploy.Controller] // ctrl, for readers outside ctrlOnce
	runOnce  sync.Once
	answers  answers
	// loggedIn is the admin's client the openstack step last logged in with (proving
	// Keystone gives a token), reused by the day-one step and by the next run while its
	// token is valid: a Keystone login is a password hash check (0.3 s here), a token
	// validation a fraction of that.
	loggedIn adminLogin
}

// adminLogin holds the admin's logged-in client.
type adminLogin struct {
	mu sync.Mutex
	c  *openstack.Client
	at time.Time
}

// loginAge is how long a logged-in client is reused (its token lasts an hour; the
// client logs in again if Keystone refuses it).
const loginAge = 30 * time.Minute

func (h *adminLogin) put(c *openstack.Client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.c, h.at = c, time.Now()
}

// get returns the client put less than loginAge ago for creds, else nil.
func (h *adminLogin) get(creds openstack.Credentials) *openstack.Client {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.c == nil || time.Since(h.at) > loginAge || !h.c.For(creds) {
		return nil
	}
	return h.c
}

// New returns the deployment resource of st.
func New(st *state.State, deps Deps) *Service {
	return &Service{st: st, init: deps.Init, images: deps.Images, storage: deps.Storage}
}

// controller is the daemon's one deployment controller (made on first use, once the
// embedded Kubernetes runs).
func (s *Service) controller() (*deploy.Controller, *node.Clients, error) {
	kc, err := s.st.Node.Clients()
	if err != nil {
		return nil, nil, err
	}
	s.ctrlOnce.Do(func() {
		s.ctrl = &deploy.Controller{Kube: kc.Kube, Dynamic: kc.Dynamic, Helm: kc.Helm, Charts: charts.FS, Since: s.st.Started,
			ImageWait: s.images.Wait, Log: slog.Default().With("component", "deploy")}
		s.ctrlP.Store(s.ctrl)
	})
	return s.ctrl, kc, nil
}

// Steps are the converge steps of the cloud: the OpenStack releases (as soon as the node
// has its roles: each release waits for its own images, so the first install while the
// later images are still built and imported), then the day-one resources; detail says
// what the running one is doing now.
func (s *Service) Steps(detail func(string)) []bootstrap.Step {
	return []bootstrap.Step{
		{Name: "openstack", Needs: []string{"node-roles"}, Run: func(ctx context.Context) (bool, string, error) { return s.ensureOpenStack(ctx, detail) }},
		{Name: "day-one", Needs: []string{"openstack", "external-network"}, Run: func(ctx context.Context) (bool, string, error) { return s.ensureDayOne(ctx, detail) }},
	}
}

// ensureOpenStack applies the OpenStackDeployment, reconciles until every release is
// Ready (then keeps the controller running), and writes the admin credentials.
func (s *Service) ensureOpenStack(ctx context.Context, detail func(string)) (bool, string, error) {
	c, kc, err := s.controller()
	if err != nil {
		return false, "", err
	}
	spec, err := s.Spec()
	if err != nil {
		return false, "", err
	}
	placement, err := s.ensurePlacement(ctx, kc.Kube, spec)
	if err != nil {
		return false, "", err
	}
	spec = Pin(spec, placement)
	if err := c.EnsureDeployment(ctx, kc.APIExt, spec); err != nil {
		return false, "", err
	}
	if _, err := c.RetryFailed(ctx); err != nil {
		return false, "", err
	}
	changed := false
	uctx, stop := s.untilImagesFail(ctx)
	defer stop()
	res, err := c.UntilReady(uctx, func(r deploy.Result, err error) {
		changed = changed || len(r.Actions) > 0
		detail(strings.Join(ProgressItems(r, err), "\n"))
	})
	if cause := context.Cause(uctx); err != nil && cause != nil && ctx.Err() == nil {
		err = cause
	}
	if err != nil {
		return changed, Progress(res, nil), err
	}
	s.runOnce.Do(func() { s.st.Go(func(ctx context.Context) { c.Run(ctx, resync) }) })
	creds, err := deploy.ReadAdminCredentials(ctx, kc.Kube, deploy.Namespace, s.KeystonePublicURL())
	if err != nil {
		return changed, "", err
	}
	wrote, err := s.writeCredentials(creds)
	if err != nil {
		return changed, "", err
	}
	if err := s.untilAnswering(ctx, enabledServices(spec), detail); err != nil {
		return changed || wrote, "", err
	}
	if _, ok := res.Status.Children["horizon"]; ok {
		s.init.SetDashboard(s.PublicURL("horizon", "public"))
	}
	return changed || wrote, fmt.Sprintf("%d releases ready and answering; credentials in %s", len(res.Status.Children), s.st.Cfg.CloudsPath()), nil
}

// untilImagesFail is ctx, cancelled when the images the releases wait for cannot be
// made ready (the image steps failed and none runs to retry): the openstack step then
// fails with that cause instead of waiting for ever.
func (s *Service) untilImagesFail(ctx context.Context) (context.Context, func()) {
	cctx, cancel := context.WithCancelCause(ctx)
	go func() {
		for cctx.Err() == nil {
			if err := s.images.Failed(); err != nil {
				cancel(fmt.Errorf("the images the releases need: %w", err))
				return
			}
			select {
			case <-cctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	}()
	return cctx, func() { cancel(nil) }
}

// Progress is one line saying where each release stands (pure).
func Progress(r deploy.Result, err error) string {
	return strings.Join(ProgressItems(r, err), ", ")
}

// ProgressItems says where each release stands, one item a release (sorted by name), and
// the last pass's error as a last item (pure). The init step's detail carries them one a
// line (api.InitState.Detail), so a client that is not a terminal prints what changed.
func ProgressItems(r deploy.Result, err error) []string {
	names := make([]string, 0, len(r.Status.Children))
	for n := range r.Status.Children {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names)+1)
	for _, n := range names {
		ch := r.Status.Children[n]
		p := n + " " + ch.State
		if ch.State != deploy.StateReady && ch.Message != "" {
			p += " (" + strings.ReplaceAll(ch.Message, "\n", " ") + ")"
		}
		parts = append(parts, p)
	}
	if err != nil {
		parts = append(parts, "last pass: "+strings.ReplaceAll(err.Error(), "\n", " "))
	}
	return parts
}

// writeCredentials writes clouds.yaml and admin-openrc (0600) unless they are current.
func (s *Service) writeCredentials(c deploy.AdminCredentials) (bool, error) {
	clouds, err := c.CloudsYAML(CloudName)
	if err != nil {
		return false, err
	}
	changed := false
	for path, data := range map[string][]byte{s.st.Cfg.CloudsPath(): clouds, s.st.Cfg.OpenRCPath(): []byte(c.OpenRC())} {
		if cur, err := os.ReadFile(path); err == nil && string(cur) == string(data) {
			continue
		}
		if err := fsutil.WriteFileAtomic(path, data, 0o600); err != nil {
			return changed, err
		}
		changed = true
	}
	return changed, nil
}

// Profile is every release the controller acted on, its phases as spans from since
// (sorted by name; nil before the controller exists).
func (s *Service) Profile(since time.Time) []api.ReleaseProfile {
	c := s.ctrlP.Load()
	if c == nil {
		return nil
	}
	tl := c.Timeline()
	cat := deploy.DefaultCatalog()
	out := make([]api.ReleaseProfile, 0, len(tl))
	for name, m := range tl {
		svc, _ := cat.Service(name)
		rp := api.ReleaseProfile{Name: name, DependsOn: svc.DependsOn}
		for _, p := range m.Phases() {
			if p.End.Before(since) {
				continue // an action of an earlier run
			}
			rp.Phases = append(rp.Phases, api.Span{Name: p.Name, Start: p.Start.Sub(since), Took: p.End.Sub(p.Start)})
		}
		out = append(out, rp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
