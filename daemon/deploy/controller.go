package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/osdcloud/osd/daemon/deploy/helmclient"
	"helm.sh/helm/v3/pkg/chart"
	corev1 "k8s.io/api/core/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// Releases is the Helm side of the controller (helmclient.Client).
type Releases interface {
	Get(ns, name string) (helmclient.Release, error)
	Apply(ctx context.Context, ch *chart.Chart, ns, name string, values map[string]any) (helmclient.Release, error)
}

// Controller converges the OpenStackDeployment Namespace/Name: it renders each enabled
// service's values, installs or upgrades Helm releases in dependency order (Plan), and
// writes status.children, status.health and the conditions. Drive it by calling Reconcile
// until Result.Ready (UntilReady), or keep it running (Run).
type Controller struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	Helm    Releases
	Charts  fs.FS // chart directories at the top level (charts.FS)
	Catalog Catalog
	Secrets []SecretSpec // generated into Namespace before any release; nil = DefaultSecrets()
	// Namespace and Name of the OpenStackDeployment; empty = Namespace, DefaultName.
	Namespace, Name string
	Log             *slog.Logger
	// Since, when set, is when this controller's cluster (re)started: pods on nodes that
	// have not reported since then are not ready, whatever the cluster recorded before.
	Since time.Time
	// ImageWait, when set, says why an image (a key of spec.images) cannot be used yet
	// ("" when it can: it is in the container runtime). A service whose images wait is
	// not installed or upgraded, and neither are the services that depend on it.
	ImageWait func(image string) string

	mu     sync.Mutex
	loaded map[string]loadedChart
	retry  map[string]bool // releases to re-apply once although their values did not change
	failed map[string]backoff
	marks  map[string]*ReleaseMarks // per release, for the profile (Timeline)
	now    func() time.Time         // tests
}

// backoff spaces out retries of a Helm action that keeps failing (10 s doubling to 5 min),
// so a broken chart does not pile up a revision every pass.
type backoff struct {
	count int
	next  time.Time
	err   string
}

func (b backoff) after(now time.Time) backoff {
	d := 10 * time.Second << min(b.count, 5)
	if d > 5*time.Minute {
		d = 5 * time.Minute
	}
	return backoff{count: b.count + 1, next: now.Add(d)}
}

type loadedChart struct {
	chart  *chart.Chart
	digest string
}

// Result is what one Reconcile pass saw and did.
type Result struct {
	Ready        bool
	Actions      []Action         // Helm actions performed in this pass
	Status       DeploymentStatus // as written
	RequeueAfter time.Duration    // when to look again (0 = ready; keep a slow resync anyway)
}

// ErrNoDeployment is returned when the OpenStackDeployment does not exist.
var ErrNoDeployment = errors.New("no OpenStackDeployment")

// Helm annotations that tie an object to its release.
const (
	annoReleaseName      = "meta.helm.sh/release-name"
	annoReleaseNamespace = "meta.helm.sh/release-namespace"
)

func (c *Controller) ns() string {
	if c.Namespace == "" {
		return Namespace
	}
	return c.Namespace
}

func (c *Controller) name() string {
	if c.Name == "" {
		return DefaultName
	}
	return c.Name
}

func (c *Controller) catalog() Catalog {
	if len(c.Catalog.Services) == 0 {
		return DefaultCatalog()
	}
	return c.Catalog
}

func (c *Controller) log() *slog.Logger {
	if c.Log == nil {
		return slog.Default()
	}
	return c.Log
}

// EnsureDeployment installs the CRD, creates the namespace and creates the
// OpenStackDeployment with spec, or replaces the spec of the existing one (the daemon calls
// it from osd init with the image references it imported).
func (c *Controller) EnsureDeployment(ctx context.Context, apiext apiextensions.Interface, spec DeploymentSpec) error {
	if err := EnsureCRD(ctx, apiext); err != nil {
		return err
	}
	if err := c.ensureNamespace(ctx, c.ns()); err != nil {
		return err
	}
	deps := Deployments{Client: c.Dynamic}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		have, err := deps.Get(ctx, c.ns(), c.name())
		if apierrors.IsNotFound(err) {
			dep := &OpenStackDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns(), Name: c.name()}, Spec: spec}
			_, err = deps.Create(ctx, dep)
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(schemaGR(), c.name(), err)
			}
			return err
		}
		if err != nil {
			return err
		}
		if sameSpec(have.Spec, spec) {
			return nil // a re-run: nothing to write
		}
		have.Spec = spec
		_, err = deps.Update(ctx, have)
		return err
	})
}

// sameSpec says whether two specs are one (as stored: their JSON).
func sameSpec(a, b DeploymentSpec) bool {
	ja, err := json.Marshal(a)
	if err != nil {
		return false
	}
	jb, err := json.Marshal(b)
	return err == nil && bytes.Equal(ja, jb)
}

func (c *Controller) ensureNamespace(ctx context.Context, ns string) error {
	_, err := c.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	return nil
}

func (c *Controller) chart(name string) (loadedChart, error) {
	if lc, ok := c.loaded[name]; ok {
		return lc, nil
	}
	ch, digest, err := helmclient.LoadChart(c.Charts, name)
	if err != nil {
		return loadedChart{}, err
	}
	if c.loaded == nil {
		c.loaded = map[string]loadedChart{}
	}
	c.loaded[name] = loadedChart{chart: ch, digest: digest}
	return c.loaded[name], nil
}

// RenderedValues returns the final values of one service for spec (what
// `osd config show --rendered SERVICE` prints): chart defaults and every layer merged.
func (c *Controller) RenderedValues(spec DeploymentSpec, service string) (map[string]any, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	svc, ok := c.catalog().Service(service)
	if !ok {
		return nil, fmt.Errorf("unknown service %q", service)
	}
	lc, err := c.chart(svc.Chart)
	if err != nil {
		return nil, err
	}
	return Render(spec, svc, lc.chart.Values)
}

// helmValues renders what Helm gets for svc and its hash. The chart digest is part of the
// values, so a new osd binary with changed templates upgrades the release.
func (c *Controller) helmValues(spec DeploymentSpec, svc Service) (loadedChart, map[string]any, string, error) {
	lc, err := c.chart(svc.Chart)
	if err != nil {
		return loadedChart{}, nil, "", err
	}
	rendered, err := Render(spec, svc, lc.chart.Values)
	if err != nil {
		return loadedChart{}, nil, "", err
	}
	vals, err := withControllerKey(HelmValues(rendered, lc.chart.Values), lc.digest)
	if err != nil {
		return loadedChart{}, nil, "", fmt.Errorf("%s: %w", svc.Name, err)
	}
	h, err := ValuesHash(vals)
	if err != nil {
		return loadedChart{}, nil, "", err
	}
	return lc, vals, h, nil
}

// Reconcile performs one pass: observe, plan, act, report. It returns an error only when it
// could not read or write what it needs; a failing release is reported in the status.
func (c *Controller) Reconcile(ctx context.Context) (Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	deps := Deployments{Client: c.Dynamic}
	dep, err := deps.Get(ctx, c.ns(), c.name())
	if apierrors.IsNotFound(err) {
		return Result{}, fmt.Errorf("%s/%s: %w", c.ns(), c.name(), ErrNoDeployment)
	}
	if err != nil {
		return Result{}, err
	}
	cat := c.catalog()
	if _, err := cat.Levels(); err != nil {
		return Result{}, err
	}
	if err := c.ensureNamespace(ctx, c.ns()); err != nil {
		return Result{}, err
	}
	secrets := c.Secrets
	if secrets == nil {
		secrets = DefaultSecrets()
	}
	if err := EnsureSecrets(ctx, c.Kube, c.ns(), secrets); err != nil {
		return Result{}, err
	}
	if err := EnsureOVNSecrets(ctx, c.Kube, c.ns(), time.Now()); err != nil {
		return Result{}, err
	}

	wants, desired, problems := c.desired(dep.Spec, cat)
	for name := range desired {
		c.mark(name)
	}
	observed, err := c.observeReleases(cat, desired)
	if err != nil {
		return Result{}, err
	}
	health, ready, seen, err := c.observeHealth(ctx, cat, desired)
	if err != nil {
		return Result{}, err
	}
	// Plan and act. Helm actions only submit objects; readiness is awaited by later passes.
	held := c.held(cat, desired)
	plan, err := PlanHeld(cat, observed, desired, ready, held)
	if err != nil {
		return Result{}, err
	}
	done := c.act(ctx, plan, wants, observed, ready, problems)
	c.noteReady(ready, seen)

	status := Summarize(cat, desired, observed, health, ready, problems)
	holdStatus(status.Children, held, desired)
	status.ObservedGeneration = dep.Generation
	status.Conditions = dep.Status.Conditions
	allReady := setConditions(&status, dep.Generation, len(desired))
	written, err := c.writeStatus(ctx, dep, status)
	if err != nil {
		return Result{}, err
	}
	res := Result{Ready: allReady && len(done) == 0, Actions: done, Status: written}
	if !res.Ready {
		res.RequeueAfter = 2 * time.Second
	}
	return res, nil
}

// held is, for every desired service whose images cannot be used yet, why.
func (c *Controller) held(cat Catalog, desired map[string]string) map[string]string {
	if c.ImageWait == nil {
		return nil
	}
	out := map[string]string{}
	for name := range desired {
		svc, _ := cat.Service(name)
		for _, im := range svc.Images {
			if why := c.ImageWait(im); why != "" {
				out[name] = why
				break
			}
		}
	}
	return out
}

// holdStatus shows a held service that has an action pending as waiting, with the reason
// (pure).
func holdStatus(children map[string]ChildStatus, held map[string]string, desired map[string]string) {
	for name, why := range held {
		cs, ok := children[name]
		if !ok || cs.State == StateFailed || (cs.Revision > 0 && cs.ValuesHash == desired[name]) {
			continue
		}
		cs.State, cs.Message = StateWaiting, why
		children[name] = cs
	}
}

// wanted is what one enabled service's release should be: its chart and values.
type wanted struct {
	lc   loadedChart
	vals map[string]any
}

// desired renders the values of every enabled service: what each release should be, its
// values hash, and why a service cannot proceed (its values do not render).
func (c *Controller) desired(spec DeploymentSpec, cat Catalog) (map[string]wanted, map[string]string, map[string]string) {
	wants := map[string]wanted{}
	desired := map[string]string{}
	problems := map[string]string{} // service -> why it cannot proceed
	for _, svc := range cat.Services {
		if !spec.ServiceEnabled(svc) {
			continue
		}
		lc, vals, h, err := c.helmValues(spec, svc)
		if err != nil {
			problems[svc.Name] = "values: " + err.Error()
			desired[svc.Name] = "invalid"
			continue
		}
		wants[svc.Name] = wanted{lc: lc, vals: vals}
		desired[svc.Name] = h
	}
	return wants, desired, problems
}

// observeReleases reads the Helm release of every desired service (a release marked for
// retry is seen without its values hash, so the plan applies it again).
func (c *Controller) observeReleases(cat Catalog, desired map[string]string) (map[string]ChildStatus, error) {
	observed := map[string]ChildStatus{}
	for name := range desired {
		svc, _ := cat.Service(name)
		rel, err := c.Helm.Get(svc.Namespace, name)
		if errors.Is(err, helmclient.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		cs := childFromRelease(rel)
		if c.retry[name] {
			cs.ValuesHash = "" // re-apply: recreates the Jobs RetryFailed deleted
		}
		observed[name] = cs
	}
	return observed, nil
}

// act runs the plan's Helm actions, except for services with a problem or waiting out
// the backoff of a failed action, and returns the actions done. It updates observed,
// ready and problems with what happened.
func (c *Controller) act(ctx context.Context, plan []Action, wants map[string]wanted, observed map[string]ChildStatus,
	ready map[string]bool, problems map[string]string) []Action {
	now := time.Now
	if c.now != nil {
		now = c.now
	}
	var done []Action
	for _, a := range plan {
		if _, bad := problems[a.Service]; bad {
			continue
		}
		if b, ok := c.failed[a.Service]; ok && now().Before(b.next) {
			problems[a.Service] = fmt.Sprintf("%s (retry in %s)", b.err, b.next.Sub(now()).Round(time.Second))
			continue
		}
		w := wants[a.Service]
		start := time.Now()
		m := c.mark(a.Service)
		*m = ReleaseMarks{Seen: m.Seen, HelmStart: c.clock()}
		rel, err := c.Helm.Apply(ctx, w.lc.chart, a.Namespace, a.Service, w.vals)
		m.HelmEnd = c.clock()
		if err != nil {
			c.backOff(a, err, now())
			problems[a.Service] = err.Error()
			if r, gerr := c.Helm.Get(a.Namespace, a.Service); gerr == nil {
				observed[a.Service] = childFromRelease(r)
			}
			continue
		}
		c.log().Info("helm release applied", "service", a.Service, "op", a.Op, "revision", rel.Revision, "elapsed", time.Since(start).Round(time.Millisecond))
		delete(c.retry, a.Service)
		delete(c.failed, a.Service)
		observed[a.Service] = childFromRelease(rel)
		ready[a.Service] = false // its objects were just (re)submitted
		done = append(done, a)
	}
	return done
}

// backOff records a failed Helm action so the next attempt waits (backoff).
func (c *Controller) backOff(a Action, err error, now time.Time) {
	if c.failed == nil {
		c.failed = map[string]backoff{}
	}
	b := c.failed[a.Service].after(now)
	b.err = err.Error()
	c.failed[a.Service] = b
	c.log().Warn("helm action failed", "service", a.Service, "op", a.Op, "err", err)
}

func childFromRelease(r helmclient.Release) ChildStatus {
	cs := ChildStatus{Chart: r.Chart, Version: r.ChartVersion, Revision: r.Revision, ValuesHash: r.ValuesHash}
	if r.Status != "deployed" {
		cs.State = StateFailed
		cs.Message = fmt.Sprintf("helm revision %d %s: %s", r.Revision, r.Status, r.Description)
	}
	return cs
}

// Summarize turns what was observed into status.children and status.health (pure).
// problems holds, per service, an error that stops it (invalid values, failed Helm action).
func Summarize(cat Catalog, desired map[string]string, observed map[string]ChildStatus,
	health map[string]WorkloadHealth, ready map[string]bool, problems map[string]string) DeploymentStatus {
	unmet := UnmetDependencies(cat, desired, ready)
	children := map[string]ChildStatus{}
	for name, hash := range desired {
		svc, _ := cat.Service(name)
		cs := observed[name]
		if cs.Chart == "" {
			cs.Chart = svc.Chart
		}
		var bad []string
		failed := false
		for _, h := range health {
			if h.Release == name && h.Reason != "" {
				bad = append(bad, fmt.Sprintf("%s/%s: %s", h.Kind, h.Name, h.Reason))
				failed = failed || h.Failed
			}
		}
		sort.Strings(bad)
		switch {
		case problems[name] != "":
			cs.State, cs.Message = StateFailed, problems[name]
		case cs.State == StateFailed:
			// Helm's last revision did not deploy: keep its message; it is retried.
		case cs.Revision == 0 && len(unmet[name]) > 0:
			cs.State, cs.Message = StateWaiting, "waiting for "+strings.Join(unmet[name], ", ")
		case cs.Revision == 0:
			cs.State, cs.Message = StatePending, ""
		case cs.ValuesHash != hash && len(unmet[name]) > 0:
			cs.State, cs.Message = StateWaiting, "upgrade waiting for "+strings.Join(unmet[name], ", ")
		case failed:
			cs.State, cs.Message = StateFailed, strings.Join(bad, "; ")
		case ready[name] && cs.ValuesHash == hash:
			cs.State, cs.Message = StateReady, ""
		default:
			cs.State = StateInstalling
			cs.Message = strings.Join(bad, "; ")
		}
		children[name] = cs
	}
	return DeploymentStatus{Children: children, Health: health}
}

// setConditions sets Ready, Progressing and Degraded from the children and reports Ready.
func setConditions(st *DeploymentStatus, gen int64, enabled int) bool {
	var notReady, failed []string
	for name, cs := range st.Children {
		if cs.State != StateReady {
			notReady = append(notReady, name)
		}
		if cs.State == StateFailed {
			failed = append(failed, fmt.Sprintf("%s: %s", name, cs.Message))
		}
	}
	sort.Strings(notReady)
	sort.Strings(failed)
	ready := len(notReady) == 0 && enabled > 0
	set := func(t string, ok bool, reason, msg string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen})
	}
	if ready {
		set(ConditionReady, true, "AllReleasesReady", fmt.Sprintf("%d releases ready", enabled))
		set(ConditionProgressing, false, "Converged", "nothing to do")
	} else {
		set(ConditionReady, false, "ReleasesNotReady", "not ready: "+strings.Join(notReady, ", "))
		set(ConditionProgressing, len(failed) < len(notReady), "Converging", "converging: "+strings.Join(notReady, ", "))
	}
	if len(failed) > 0 {
		set(ConditionDegraded, true, "ReleaseFailed", strings.Join(failed, "; "))
	} else {
		set(ConditionDegraded, false, "NoFailures", "no failures")
	}
	return ready
}

func (c *Controller) writeStatus(ctx context.Context, dep *OpenStackDeployment, st DeploymentStatus) (DeploymentStatus, error) {
	deps := Deployments{Client: c.Dynamic}
	if statusEqual(dep.Status, st) {
		return dep.Status, nil
	}
	var out DeploymentStatus
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := deps.Get(ctx, dep.Namespace, dep.Name)
		if err != nil {
			return err
		}
		cur.Status = st
		upd, err := deps.UpdateStatus(ctx, cur)
		if err != nil {
			return err
		}
		out = upd.Status
		return nil
	})
	return out, err
}

func statusEqual(a, b DeploymentStatus) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// RetryFailed deletes the failed Jobs of the deployment's releases (a Job that reached its
// backoff limit never runs again by itself) and has the next Reconcile re-apply those
// releases, which recreates the Jobs. osd init calls it before converging, so re-running
// init after fixing a cause retries. It returns the Jobs it deleted.
func (c *Controller) RetryFailed(ctx context.Context) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cat := c.catalog()
	var deleted []string
	for _, ns := range namespacesOf(cat) {
		jobs, err := c.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return deleted, fmt.Errorf("list jobs in %s: %w", ns, err)
		}
		for _, j := range jobs.Items {
			rel := j.Annotations[annoReleaseName]
			svc, ok := cat.Service(rel)
			if !ok || svc.Namespace != ns || j.Annotations[annoReleaseNamespace] != ns || !JobHealth(&j, nil, nil).Failed {
				continue
			}
			bg := metav1.DeletePropagationBackground
			err := c.Kube.BatchV1().Jobs(ns).Delete(ctx, j.Name, metav1.DeleteOptions{PropagationPolicy: &bg})
			if err != nil && !apierrors.IsNotFound(err) {
				return deleted, fmt.Errorf("delete failed job %s/%s: %w", ns, j.Name, err)
			}
			if c.retry == nil {
				c.retry = map[string]bool{}
			}
			c.retry[rel] = true
			deleted = append(deleted, ns+"/"+j.Name)
		}
	}
	return deleted, nil
}

func namespacesOf(cat Catalog) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range cat.Services {
		if !seen[s.Namespace] {
			seen[s.Namespace] = true
			out = append(out, s.Namespace)
		}
	}
	sort.Strings(out)
	return out
}

// UntilReady reconciles until the deployment is Ready or ctx ends, calling progress after
// every pass (with the pass's error, if any: errors are retried, not fatal).
func (c *Controller) UntilReady(ctx context.Context, progress func(Result, error)) (Result, error) {
	for {
		res, err := c.Reconcile(ctx)
		if progress != nil {
			progress(res, err)
		}
		if err == nil && res.Ready {
			return res, nil
		}
		wait := res.RequeueAfter
		if err != nil || wait == 0 {
			wait = 5 * time.Second
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return res, fmt.Errorf("deployment not ready: %w", err)
		case <-time.After(wait):
		}
	}
}

// Run reconciles until ctx ends: every 2 s while converging, every resync when ready.
func (c *Controller) Run(ctx context.Context, resync time.Duration) {
	for {
		res, err := c.Reconcile(ctx)
		wait := res.RequeueAfter
		switch {
		case errors.Is(err, ErrNoDeployment):
			wait = resync
		case err != nil:
			c.log().Warn("reconcile failed", "err", err)
			wait = 5 * time.Second
		case wait == 0:
			wait = resync
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
