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
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// packerVersion changes whenever the way images are packed changes, so that
// cached images packed the old way are rebuilt.
const packerVersion = "osd-images-pack-1"

// Event is one progress report of a build.
type Event struct {
	Image    string
	Step     string // resolve, mmdebstrap, go-build, pack, store, done
	Message  string
	Packages int     // packages set up so far (mmdebstrap step)
	Total    int     // packages expected
	MB       float64 // uncompressed MB packed so far (pack step)
}

// Result is the outcome of one Build.
type Result struct {
	Stored
	Cached   bool
	Duration time.Duration
	// Steps is how long each step took (resolve, mmdebstrap or go-build,
	// pack, store).
	Steps []StepTime
}

// StepTime is the duration of one build step.
type StepTime struct {
	Step     string
	Duration time.Duration
}

// stepClock records step durations.
type stepClock struct {
	steps []StepTime
	last  time.Time
}

func newStepClock() *stepClock { return &stepClock{last: time.Now()} }

// done closes the step that ran since the previous call.
func (c *stepClock) done(step string) {
	now := time.Now()
	c.steps = append(c.steps, StepTime{Step: step, Duration: now.Sub(c.last)})
	c.last = now
}

// Builder builds recipes into the image store under StateDir/images.
type Builder struct {
	// StateDir holds images/ (the OCI store), cache/debs/<image>/ (reused
	// .debs), apt/ (package resolution state) and work/ (build trees).
	StateDir string
	// Sources are the apt sources builds and resolution use; empty means
	// the host's configured sources for the recipe's suite (HostSources).
	Sources []AptSource
	// ListsMaxAge is how old the resolution package lists may get before
	// they are refreshed (default 1h).
	ListsMaxAge time.Duration
	// Progress, if set, receives build progress (called from the build's
	// goroutine).
	Progress func(Event)
	// Log receives the tools' output lines at debug level (default: discard).
	Log *slog.Logger

	once      sync.Once
	store     *Store
	err       error
	resolveMu sync.Mutex // one apt-get at a time on the shared lists
}

// Store returns the builder's image store.
func (b *Builder) Store() (*Store, error) {
	b.once.Do(func() { b.store, b.err = OpenStore(filepath.Join(b.StateDir, "images")) })
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

func (b *Builder) sources(suite string) ([]AptSource, error) {
	if len(b.Sources) > 0 {
		return b.Sources, nil
	}
	return HostSources(suite)
}

// CacheKey computes the key a recipe's image is cached under, and for a
// Debian recipe the package versions it would install now.
func (b *Builder) CacheKey(ctx context.Context, r Recipe) (string, map[string]string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\nrecipe %s\n", packerVersion, r.Hash())
	var vers map[string]string
	switch r.Kind {
	case KindDebian:
		srcs, err := b.sources(r.Suite)
		if err != nil {
			return "", nil, err
		}
		maxAge := b.ListsMaxAge
		if maxAge == 0 {
			maxAge = time.Hour
		}
		res := AptDir{Dir: filepath.Join(b.StateDir, "apt", r.Suite), Sources: srcs, MaxAge: maxAge}
		b.resolveMu.Lock()
		vers, err = res.Resolve(ctx, baseSet(r.Variant), r.Packages)
		b.resolveMu.Unlock()
		if err != nil {
			return "", nil, fmt.Errorf("resolve packages: %w", err)
		}
		for _, s := range srcs {
			fmt.Fprintf(h, "source %s\n", s.Line())
		}
		fmt.Fprintf(h, "packages\n%s\n", versionLines(vers))
	case KindPause:
		sum := sha256.Sum256(PauseBinary())
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
// the same cache key (then Cached is true and nothing is rebuilt).
func (b *Builder) Build(ctx context.Context, r Recipe) (Result, error) {
	start := time.Now()
	clock := newStepClock()
	if err := r.Validate(); err != nil {
		return Result{}, err
	}
	if err := checkArch(); err != nil {
		return Result{}, err
	}
	store, err := b.Store()
	if err != nil {
		return Result{}, err
	}
	b.emit(Event{Image: r.Name, Step: "resolve", Message: "resolving package versions"})
	key, vers, err := b.CacheKey(ctx, r)
	if err != nil {
		return Result{}, fmt.Errorf("build %s: %w", r.Name, err)
	}
	clock.done("resolve")
	if _, st, err := store.Get(r.Name); err == nil && st.CacheKey == key && st.Ref == r.Ref {
		b.emit(Event{Image: r.Name, Step: "done", Message: "cached"})
		return Result{Stored: st, Cached: true, Duration: time.Since(start), Steps: clock.steps}, nil
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
		layerFile := filepath.Join(b.StateDir, "work", fmt.Sprintf("%s-%d.layer.tar.gz", r.Name, time.Now().UnixNano()))
		defer os.Remove(layerFile) // normally moved into the store by Put
		img, err = b.buildDebian(ctx, r, len(vers), layerFile, clock)
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

// buildDebian runs mmdebstrap into a work directory, adds the recipe's
// files and packs the tree into a single-layer image.
func (b *Builder) buildDebian(ctx context.Context, r Recipe, total int, layerFile string, clock *stepClock) (v1.Image, error) {
	work, err := os.MkdirTemp(filepath.Join(b.StateDir, "work"), r.Name+"-")
	if errors.Is(err, os.ErrNotExist) {
		if err = os.MkdirAll(filepath.Join(b.StateDir, "work"), 0o755); err == nil {
			work, err = os.MkdirTemp(filepath.Join(b.StateDir, "work"), r.Name+"-")
		}
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := removeTree(work); err != nil {
			b.logger().Warn("remove build tree", "dir", work, "err", err)
		}
	}()
	rootfs := filepath.Join(work, "rootfs")
	started := time.Now()
	if err := b.mmdebstrap(ctx, r, work, rootfs, total); err != nil {
		return nil, err
	}
	if err := writeFiles(rootfs, r.Files); err != nil {
		return nil, err
	}
	clock.done("mmdebstrap")
	b.emit(Event{Image: r.Name, Step: "pack", Message: "packing root filesystem"})
	layer, err := LayerFromDir(rootfs, DirOptions{
		Exclude:          append(append([]string(nil), RootfsExcludes...), r.Exclude...),
		KeepMtimesBefore: started.Add(-time.Second),
		LayerFile:        layerFile,
		Progress: func(n int, bytes int64) {
			b.emit(Event{Image: r.Name, Step: "pack", Packages: total, Total: total, MB: float64(bytes) / 1e6, Message: fmt.Sprintf("%d entries", n)})
		},
	})
	if err != nil {
		return nil, err
	}
	img, err := ImageFromLayers([]v1.Layer{layer}, r.Config())
	clock.done("pack")
	return img, err
}
