package helmclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mitchellh/copystructure"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// maxHistory bounds the release records Helm keeps per release.
const maxHistory = 5

// ValuesHasher hashes the values a release was installed with (deploy.ValuesHash).
type ValuesHasher func(map[string]any) (string, error)

// Client runs Helm actions. Actions are serialized: they only submit objects (no Helm wait),
// so they are quick; waiting for readiness is the caller's job and happens concurrently.
type Client struct {
	newConfig func(ns string) (*action.Configuration, error)
	hash      ValuesHasher
	// records says which records (Secrets, with their resource versions) a release has
	// now, as one string; nil: Get always reads the release.
	records func(ns, name string) (string, error)

	mu      sync.Mutex
	configs map[string]*action.Configuration
	// described is Get's last answer per namespace/name and the records it was read from:
	// reading a release decodes every kept revision (gzip and JSON of the chart and its
	// manifest), which each controller pass and each osd init did for every release.
	described map[string]describedRelease
}

type describedRelease struct {
	records string
	rel     Release
}

// New returns a Client for the cluster at cfg, storing release records as Secrets in each
// release's namespace (Helm's default driver).
func New(cfg *rest.Config, hash ValuesHasher, log *slog.Logger) *Client {
	c := NewWithConfigs(func(ns string) (*action.Configuration, error) {
		ac := &action.Configuration{}
		debug := func(format string, v ...any) {
			log.Debug(fmt.Sprintf(format, v...), "component", "helm", "namespace", ns)
		}
		if err := ac.Init(&RESTGetter{Config: cfg, Namespace: ns}, ns, "secret", debug); err != nil {
			return nil, fmt.Errorf("helm configuration for %s: %w", ns, err)
		}
		return ac, nil
	}, hash)
	if meta, err := metadata.NewForConfig(cfg); err == nil {
		c.records = func(ns, name string) (string, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			list, err := meta.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace(ns).List(ctx,
				metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
			if err != nil {
				return "", err
			}
			keys := make([]string, 0, len(list.Items))
			for _, it := range list.Items {
				keys = append(keys, it.Name+"@"+it.ResourceVersion)
			}
			return recordsKey(keys), nil
		}
	}
	return c
}

// recordsKey is one string for a release's records, whatever order they were listed in.
func recordsKey(keys []string) string {
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

// NewWithConfigs returns a Client whose per-namespace configurations come from newConfig
// (tests hand in the in-memory driver and a fake kube client).
func NewWithConfigs(newConfig func(ns string) (*action.Configuration, error), hash ValuesHasher) *Client {
	return &Client{newConfig: newConfig, hash: hash, configs: map[string]*action.Configuration{}, described: map[string]describedRelease{}}
}

func (c *Client) config(ns string) (*action.Configuration, error) {
	if ac, ok := c.configs[ns]; ok {
		return ac, nil
	}
	ac, err := c.newConfig(ns)
	if err != nil {
		return nil, err
	}
	c.configs[ns] = ac
	return ac, nil
}

// Release is what osd needs to know of a Helm release's last revision.
type Release struct {
	Name         string
	Namespace    string
	Revision     int
	Status       string // Helm status: deployed, failed, pending-install, ...
	Chart        string
	ChartVersion string
	// ValuesHash is the hash of the values the last revision was given, empty unless that
	// revision deployed (so a failed or interrupted one is retried).
	ValuesHash  string
	Description string
}

// ErrNotFound is returned by Get for a release that does not exist.
var ErrNotFound = errors.New("release not found")

// Get returns the last revision of a release, or ErrNotFound.
func (c *Client) Get(ns, name string) (Release, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ac, err := c.config(ns)
	if err != nil {
		return Release{}, err
	}
	// Unchanged records (same Secrets, same resource versions): the same release.
	records := ""
	if c.records != nil {
		if records, err = c.records(ns, name); err != nil {
			records = ""
		}
	}
	key := ns + "/" + name
	if d, ok := c.described[key]; ok && records != "" && d.records == records {
		return d.rel, nil
	}
	rel, err := c.last(ac, name)
	if err != nil || records == "" {
		delete(c.described, key)
		return rel, err
	}
	c.described[key] = describedRelease{records: records, rel: rel}
	return rel, nil
}

func (c *Client) last(ac *action.Configuration, name string) (Release, error) {
	rel, err := ac.Releases.Last(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return Release{}, fmt.Errorf("helm release %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return Release{}, fmt.Errorf("helm release %s: %w", name, err)
	}
	return c.describe(rel)
}

func (c *Client) describe(rel *release.Release) (Release, error) {
	r := Release{Name: rel.Name, Namespace: rel.Namespace, Revision: rel.Version}
	if rel.Info != nil {
		r.Status = rel.Info.Status.String()
		r.Description = rel.Info.Description
	}
	if rel.Chart != nil && rel.Chart.Metadata != nil {
		r.Chart, r.ChartVersion = rel.Chart.Metadata.Name, rel.Chart.Metadata.Version
	}
	if r.Status == release.StatusDeployed.String() {
		h, err := c.hash(rel.Config)
		if err != nil {
			return Release{}, fmt.Errorf("helm release %s: %w", rel.Name, err)
		}
		r.ValuesHash = h
	}
	return r, nil
}

// Apply installs the release when it does not exist and upgrades it otherwise, with exactly
// values (no reuse of earlier values). A last revision left pending by a killed process is
// marked failed first, so the upgrade can proceed. Apply never waits for readiness.
func (c *Client) Apply(ctx context.Context, ch *chart.Chart, ns, name string, values map[string]any) (Release, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ac, err := c.config(ns)
	if err != nil {
		return Release{}, err
	}
	// Helm writes into the chart's and the caller's values while it coalesces them (it
	// adds each dependency's "global" map). The caller keeps charts and values to compare
	// against on the next pass, so Helm gets private copies.
	ch, err = privateValues(ch)
	if err != nil {
		return Release{}, err
	}
	if values, err = copyValues(values); err != nil {
		return Release{}, err
	}
	last, err := ac.Releases.Last(name)
	switch {
	case errors.Is(err, driver.ErrReleaseNotFound):
		in := action.NewInstall(ac)
		in.ReleaseName, in.Namespace = name, ns
		in.Timeout = 5 * time.Minute
		rel, err := in.RunWithContext(ctx, ch, values)
		if err != nil {
			return Release{}, fmt.Errorf("helm install %s: %w", name, err)
		}
		return c.describe(rel)
	case err != nil:
		return Release{}, fmt.Errorf("helm release %s: %w", name, err)
	}
	if last.Info != nil && last.Info.Status.IsPending() {
		last.Info.Status = release.StatusFailed
		last.Info.Description = "interrupted: marked failed by osd before retrying"
		if err := ac.Releases.Update(last); err != nil {
			return Release{}, fmt.Errorf("helm release %s: mark interrupted revision %d failed: %w", name, last.Version, err)
		}
	}
	up := action.NewUpgrade(ac)
	up.Namespace = ns
	up.MaxHistory = maxHistory
	up.Timeout = 5 * time.Minute
	rel, err := up.RunWithContext(ctx, name, ch, values)
	if err != nil {
		return Release{}, fmt.Errorf("helm upgrade %s: %w", name, err)
	}
	return c.describe(rel)
}

// privateValues returns a shallow copy of ch (and of its dependencies) whose values maps
// are deep copies, so Helm's in-place coalescing cannot change ch.
func privateValues(ch *chart.Chart) (*chart.Chart, error) {
	cp := *ch
	var err error
	if cp.Values, err = copyValues(ch.Values); err != nil {
		return nil, err
	}
	deps := ch.Dependencies()
	copies := make([]*chart.Chart, len(deps))
	for i, d := range deps {
		if copies[i], err = privateValues(d); err != nil {
			return nil, err
		}
	}
	cp.SetDependencies(copies...)
	return &cp, nil
}

func copyValues(v map[string]any) (map[string]any, error) {
	if v == nil {
		return nil, nil
	}
	c, err := copystructure.Copy(v)
	if err != nil {
		return nil, fmt.Errorf("copy values: %w", err)
	}
	return c.(map[string]any), nil
}

// Uninstall removes a release and its objects; a missing release is not an error.
func (c *Client) Uninstall(ns, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ac, err := c.config(ns)
	if err != nil {
		return err
	}
	un := action.NewUninstall(ac)
	un.IgnoreNotFound = true
	if _, err := un.Run(name); err != nil {
		return fmt.Errorf("helm uninstall %s: %w", name, err)
	}
	return nil
}

// Template renders a chart with values without a cluster and returns the manifests
// (hooks included), as `helm template` would.
func Template(ctx context.Context, ch *chart.Chart, ns, name string, values map[string]any) (string, error) {
	in := action.NewInstall(&action.Configuration{})
	in.DryRun, in.ClientOnly, in.Replace = true, true, true
	in.ReleaseName, in.Namespace = name, ns
	in.KubeVersion = &chartutil.KubeVersion{Version: "v1.34.0", Major: "1", Minor: "34"}
	rel, err := in.RunWithContext(ctx, ch, values)
	if err != nil {
		return "", fmt.Errorf("helm template %s: %w", name, err)
	}
	out := rel.Manifest
	for _, h := range rel.Hooks {
		out += "\n---\n# Source: " + h.Path + "\n" + h.Manifest
	}
	return out, nil
}
