package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/osdcloud/osd/bootstrap/images/asm"
	"github.com/osdcloud/osd/bootstrap/images/oci"
)

// packerVersion changes whenever the way images are packed changes, so that
// cached images packed the old way are rebuilt.
const packerVersion = "osd-images-pack-2" // 2: uncompressed layers, layered images

// Event is one progress report of a build.
type Event struct {
	Image    string
	Step     string // resolve, download, install, go-build, customize, pack, store, done
	Message  string
	Packages int     // packages set up so far (install step)
	Total    int     // packages expected
	MB       float64 // MB packed so far (pack step)
}

// Result is the outcome of one Build.
type Result struct {
	Stored
	Cached   bool
	Duration time.Duration
	// Steps is when each step of the build ran (resolve, download, install or
	// go-build, customize, pack, store).
	Steps []StepTime
}

// StepTime is one step of a build: when it started and how long it took.
type StepTime struct {
	Step     string
	Start    time.Time
	Duration time.Duration
}

// stepClock records step times.
type stepClock struct {
	steps []StepTime
	last  time.Time
}

func newStepClock() *stepClock { return &stepClock{last: time.Now()} }

// done closes the step that ran since the previous call.
func (c *stepClock) done(step string) {
	now := time.Now()
	c.steps = append(c.steps, StepTime{Step: step, Start: c.last, Duration: now.Sub(c.last)})
	c.last = now
}

// Builder builds one release's recipes into its image store (ReleaseDir/images).
type Builder struct {
	// StateDir holds apt/ (package resolution state, per Debian suite) and each
	// release's directory (ReleaseDir: StateDir itself for Zed) with images/ (the OCI
	// store), cache/debs/ (downloaded .debs, shared by the release's images), layers/
	// (the trees of the images others are layered on) and work/ (build trees).
	StateDir string
	// Release is the OpenStack release whose images this builder makes (zero: the
	// default release). Each release keeps its own store, .deb cache, layer trees and
	// build trees (ReleaseDir); the apt state (per Debian suite) is shared.
	Release Release
	// Catalog is what a recipe's Base names are looked up in (nil: RecipesFor(Release)).
	Catalog []Recipe
	// Parallel is how many images BuildAll builds at once (0: 2).
	Parallel int
	// Sources are the apt sources builds and resolution use; empty means
	// the host's configured sources for the recipe's suite (HostSources).
	Sources []AptSource
	// ListsMaxAge is how old the resolution package lists may get before
	// they are refreshed (default 1h).
	ListsMaxAge time.Duration
	// RefreshLater lets BuildAll answer from lists older than ListsMaxAge when the
	// store holds every image it was asked for at the keys those lists give: it then
	// refreshes them in the background (a later BuildAll builds what changed) instead
	// of before answering. Lists never fetched, changed sources or an image to build
	// refresh them first, as without it.
	RefreshLater bool
	// Progress, if set, receives build progress (called from the builds'
	// goroutines, possibly at the same time).
	Progress func(Event)
	// Built, if set, is told of every image BuildAll finished (built or cached), as
	// soon as it is in the store (called from the builds' goroutines).
	Built func(Result)
	// Log receives the tools' output lines at debug level (default: discard).
	Log *slog.Logger

	once      sync.Once
	cleanOnce sync.Once // cleanStaleWork, before the first build
	store     *Store
	err       error
	// listsMu guards the shared apt state: a refresh of the lists holds it alone,
	// resolutions and downloads (which only read the lists) share it.
	listsMu    sync.RWMutex
	downloadMu sync.Mutex     // one download into the shared .deb cache at a time
	treeMu     sync.Mutex     // one extraction of a kept layer tree at a time
	refreshing atomic.Bool    // a background refresh of the lists runs
	refreshWG  sync.WaitGroup // it
}

// Store returns the builder's image store.
func (b *Builder) Store() (*Store, error) {
	b.once.Do(func() { b.store, b.err = OpenStore(filepath.Join(b.releaseDir(), "images")) })
	return b.store, b.err
}

func (b *Builder) emit(e Event) {
	if b.Progress != nil {
		b.Progress(e)
	}
}

func (b *Builder) logger() *slog.Logger {
	if b.Log != nil {
		return b.Log
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func (b *Builder) catalog() []Recipe {
	if b.Catalog != nil {
		return b.Catalog
	}
	return RecipesFor(b.release())
}

// release is the release the builder makes images of.
func (b *Builder) release() Release {
	if b.Release.Name == "" {
		return DefaultRelease()
	}
	return b.Release
}

// releaseDir holds the builder's release's images/, cache/debs/, layers/ and work/.
func (b *Builder) releaseDir() string { return ReleaseDir(b.StateDir, b.release()) }

// ReleaseDir is where a builder of stateDir keeps rel's images/, cache/debs/, layers/
// and work/:
// stateDir itself for Zed (whose images were there before osd had releases),
// stateDir/releases/NAME for every later release.
func ReleaseDir(stateDir string, rel Release) string {
	if rel.Name == Zed {
		return stateDir
	}
	return filepath.Join(stateDir, "releases", rel.Name)
}

func (b *Builder) sources(suite string) ([]AptSource, error) {
	if len(b.Sources) > 0 {
		return b.Sources, nil
	}
	return HostSources(suite)
}

func (b *Builder) aptDir(suite string) (AptDir, error) {
	srcs, err := b.sources(suite)
	if err != nil {
		return AptDir{}, err
	}
	maxAge := b.ListsMaxAge
	if maxAge == 0 {
		maxAge = time.Hour
	}
	return AptDir{Dir: filepath.Join(b.StateDir, "apt", suite), Sources: srcs, MaxAge: maxAge}, nil
}

// resolve refreshes the lists if they are stale (alone), then resolves (beside other
// resolutions and downloads). A session that takes stale lists (staleOK) resolves from
// lists past their age that are otherwise usable, and records that it did.
func (b *Builder) resolve(ctx context.Context, apt AptDir, base, pkgs []string, sess *session) (map[string]string, error) {
	b.listsMu.RLock()
	fresh := apt.Fresh()
	takeStale := !fresh && sess != nil && sess.staleOK && apt.Usable()
	b.listsMu.RUnlock()
	switch {
	case fresh:
	case takeStale:
		sess.usedStale.Store(true)
	default:
		if err := b.refresh(ctx, apt); err != nil {
			return nil, err
		}
	}
	b.listsMu.RLock()
	defer b.listsMu.RUnlock()
	ro := apt
	ro.MaxAge = 1 << 62 // refreshed above or taken stale: never updated under the shared lock
	return ro.Resolve(ctx, base, pkgs)
}

// refresh brings the lists of apt up to date, holding listsMu alone (only when there
// is something to do: waiting for it would wait for every resolution under way).
func (b *Builder) refresh(ctx context.Context, apt AptDir) error {
	b.listsMu.RLock()
	fresh := apt.Fresh()
	b.listsMu.RUnlock()
	if fresh {
		return nil
	}
	b.listsMu.Lock()
	defer b.listsMu.Unlock()
	return apt.Refresh(ctx)
}

// CacheKey computes the key a recipe's image is cached under, and for a
// Debian recipe the package versions its image holds (the whole chain's).
func (b *Builder) CacheKey(ctx context.Context, r Recipe) (string, map[string]string, error) {
	return b.cacheKey(ctx, r, nil)
}

// cacheKey is CacheKey within a session (nil: none).
func (b *Builder) cacheKey(ctx context.Context, r Recipe, sess *session) (string, map[string]string, error) {
	ch, err := chain(b.catalog(), r)
	if err != nil {
		return "", nil, err
	}
	return b.chainKey(ctx, ch, sess)
}

// chainKey is the cache key of the last recipe of ch: its recipe, its packages'
// versions (resolved for the whole chain) and its base's key, so a changed base
// rebuilds what is layered on it and a changed top rebuilds only the top.
func (b *Builder) chainKey(ctx context.Context, ch []Recipe, sess *session) (string, map[string]string, error) {
	r := ch[len(ch)-1]
	h := sha256.New()
	fmt.Fprintf(h, "%s\nrecipe %s\n", packerVersion, r.Hash())
	var vers map[string]string
	switch r.Kind {
	case KindDebian:
		if len(ch) > 1 {
			baseKey, _, err := b.chainKey(ctx, ch[:len(ch)-1], sess)
			if err != nil {
				return "", nil, err
			}
			fmt.Fprintf(h, "base %s\n", baseKey)
		}
		apt, err := b.aptDir(r.Suite)
		if err != nil {
			return "", nil, err
		}
		vers, err = b.resolve(ctx, apt, baseSet(ch[0].Variant), chainPackages(ch), sess)
		if err != nil {
			return "", nil, fmt.Errorf("resolve packages: %w", err)
		}
		for _, s := range apt.Sources {
			fmt.Fprintf(h, "source %s\n", s.Line())
		}
		fmt.Fprintf(h, "packages\n%s\n", versionLines(vers))
	case KindPause:
		sum := sha256.Sum256(asm.PauseBinary())
		fmt.Fprintf(h, "pause %x\n", sum)
	case KindGo:
		v, err := goVersion(ctx)
		if err != nil {
			return "", nil, err
		}
		fmt.Fprintf(h, "go %s\n", v)
	}
	return hex.EncodeToString(h.Sum(nil)), vers, nil
}

// Build makes the recipe's image unless the store already holds one with
// the same cache key (then Cached is true and nothing is rebuilt). The images
// it is layered on are built first when they are not current.
func (b *Builder) Build(ctx context.Context, r Recipe) (Result, error) {
	return b.build(ctx, r, newSession(b))
}

func (b *Builder) build(ctx context.Context, r Recipe, sess *session) (Result, error) {
	start := time.Now()
	clock := newStepClock()
	if err := r.Validate(); err != nil {
		return Result{}, err
	}
	if err := checkArch(); err != nil {
		return Result{}, err
	}
	ch, err := chain(b.catalog(), r)
	if err != nil {
		return Result{}, err
	}
	store, err := b.Store()
	if err != nil {
		return Result{}, err
	}
	b.emit(Event{Image: r.Name, Step: "resolve", Message: "resolving package versions"})
	key, vers, err := b.chainKey(ctx, ch, sess)
	if err != nil {
		return Result{}, fmt.Errorf("build %s: %w", r.Name, err)
	}
	clock.done("resolve")
	if _, st, err := store.Get(r.Name); err == nil && st.CacheKey == key && st.Ref == r.Ref {
		b.emit(Event{Image: r.Name, Step: "done", Message: "cached"})
		return Result{Stored: st, Cached: true, Duration: time.Since(start), Steps: clock.steps}, nil
	} else if errors.Is(err, ErrCorrupt) {
		b.emit(Event{Image: r.Name, Step: "resolve", Message: "building again: " + err.Error()})
	} else if err != nil && !errors.Is(err, ErrNotStored) {
		return Result{}, err
	}
	var img v1.Image
	switch r.Kind {
	case KindPause:
		img, err = PauseImage()
		clock.done("pack")
	case KindGo:
		img, err = b.buildGo(ctx, r, clock)
	case KindDebian:
		layerFile := filepath.Join(b.releaseDir(), "work", fmt.Sprintf("%s%d.layer.tar", workName(r.Name), time.Now().UnixNano()))
		defer os.Remove(layerFile) // normally moved into the store by Put
		img, err = b.buildDebian(ctx, ch, vers, layerFile, sess, clock)
	}
	if err != nil {
		return Result{}, fmt.Errorf("build %s: %w", r.Name, err)
	}
	b.emit(Event{Image: r.Name, Step: "store", Message: "storing image"})
	st, err := store.Put(img, Stored{Name: r.Name, Ref: r.Ref, RecipeHash: r.Hash(), CacheKey: key})
	if err != nil {
		return Result{}, err
	}
	clock.done("store")
	res := Result{Stored: st, Duration: time.Since(start), Steps: clock.steps}
	b.emit(Event{Image: r.Name, Step: "done", Message: fmt.Sprintf("%s %.1f MB in %s", st.Digest, float64(st.Size)/1e6, res.Duration.Round(time.Millisecond))})
	return res, nil
}

// buildDebian builds the top layer of the last recipe of ch (a root with mmdebstrap,
// else its packages installed over the trees of the images below) and stacks it on
// the base image's layers.
func (b *Builder) buildDebian(ctx context.Context, ch []Recipe, vers map[string]string, layerFile string, sess *session, clock *stepClock) (v1.Image, error) {
	r := ch[len(ch)-1]
	total := len(vers)
	var base v1.Image
	if r.Base != "" {
		parent, _ := RecipeByNameIn(b.catalog(), r.Base)
		if _, err := sess.build(ctx, parent); err != nil {
			return nil, fmt.Errorf("base image %s: %w", r.Base, err)
		}
		store, err := b.Store()
		if err != nil {
			return nil, err
		}
		if base, _, err = store.Get(r.Base); err != nil {
			return nil, err
		}
		clock.last = time.Now() // waiting for the base is not this image's time
		if _, below, err := b.chainKey(ctx, ch[:len(ch)-1], sess); err == nil {
			total -= len(below)
		}
	}
	work, err := b.workDir(r.Name)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := removeTree(work); err != nil {
			b.logger().Warn("remove build tree", "dir", work, "err", err)
		}
	}()
	debs, err := b.fetchDebs(ctx, sess, r, vers, work)
	if err != nil {
		return nil, err
	}
	clock.done("download")
	lb := &layerBuild{b: b, ch: ch, work: work, debs: debs, total: total, layerFile: layerFile, started: time.Now()}
	if base == nil {
		err = lb.root(ctx)
	} else {
		err = lb.onBase(ctx)
	}
	if err != nil {
		return nil, err
	}
	clock.done("install")
	if err := lb.customize(); err != nil {
		return nil, err
	}
	b.linkNewDebs(debs)
	clock.done("customize")
	layer, err := lb.pack()
	if err != nil {
		return nil, err
	}
	var layers []v1.Layer
	if base != nil {
		if layers, err = base.Layers(); err != nil {
			return nil, err
		}
	}
	img, err := oci.ImageFromLayers(append(layers, layer), r.Config())
	if err == nil && isBase(b.catalog(), r.Name) {
		err = b.keepTree(r.Name, lb.tree(), layer, lb.started.Add(-time.Second))
	}
	clock.done("pack")
	return img, err
}

// workDir makes a fresh build directory under the release's work/.
func (b *Builder) workDir(name string) (string, error) {
	dir := filepath.Join(b.releaseDir(), "work")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return os.MkdirTemp(dir, workName(name))
}

// RecipeByNameIn returns the recipe called name in catalog.
func RecipeByNameIn(catalog []Recipe, name string) (Recipe, bool) {
	for _, r := range catalog {
		if r.Name == name {
			return r, true
		}
	}
	return Recipe{}, false
}
