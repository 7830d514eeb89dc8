package images

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// session is one BuildAll (or Build): each image is built at most once in it (an image
// and the images layered on it ask for it at the same time), and its .debs may be
// downloaded ahead of the builds that install them.
type session struct {
	b       *Builder
	mu      sync.Mutex
	flights map[string]*flight
	fetched map[string]*flight // recipe -> its .debs are in the shared cache
	// staleOK lets the session's resolutions use lists older than their maximum age
	// (Builder.RefreshLater; set before any of them runs); usedStale says one did.
	staleOK   bool
	usedStale atomic.Bool
}

type flight struct {
	done chan struct{}
	res  Result
	err  error
}

func newSession(b *Builder) *session {
	return &session{b: b, flights: map[string]*flight{}, fetched: map[string]*flight{}}
}

// build builds r once per session; later callers wait for the first.
func (s *session) build(ctx context.Context, r Recipe) (Result, error) {
	s.mu.Lock()
	f, ok := s.flights[r.Name]
	if !ok {
		f = &flight{done: make(chan struct{})}
		s.flights[r.Name] = f
	}
	s.mu.Unlock()
	if !ok {
		f.res, f.err = s.b.build(ctx, r, s)
		close(f.done)
	}
	select {
	case <-f.done:
		return f.res, f.err
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

// planned is one image BuildAll may build: its recipe, its package versions and
// whether the store holds it at its cache key.
type planned struct {
	r       Recipe
	vers    map[string]string
	cached  bool
	weight  int // images layered on it, directly or not
	ordinal int // catalog order
}

// buildOrder sorts what to build: images others are layered on first (most
// dependants first), then the larger ones, then catalog order (pure).
func buildOrder(ps []planned) []planned {
	out := append([]planned(nil), ps...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.weight != b.weight {
			return a.weight > b.weight
		}
		if size(a) != size(b) {
			return size(a) > size(b)
		}
		return a.ordinal < b.ordinal
	})
	return out
}

// size is how much work an image is, roughly: its packages, and a Go build counts as
// a large image (it compiles for minutes on two cores).
func size(p planned) int {
	if p.r.Kind == KindGo {
		return 500
	}
	return len(p.vers)
}

// dependants counts, for every recipe, the recipes layered on it directly or not.
func dependants(catalog []Recipe) map[string]int {
	out := map[string]int{}
	for _, r := range catalog {
		ch, err := chain(catalog, r)
		if err != nil {
			continue
		}
		for _, below := range ch[:len(ch)-1] {
			out[below.Name]++
		}
	}
	return out
}

// withBases adds to names the images they are layered on, in catalog order.
func withBases(catalog []Recipe, names []string) ([]Recipe, error) {
	want := map[string]bool{}
	for _, n := range names {
		r, ok := RecipeByNameIn(catalog, n)
		if !ok {
			return nil, fmt.Errorf("unknown image %q", n)
		}
		ch, err := chain(catalog, r)
		if err != nil {
			return nil, err
		}
		for _, c := range ch {
			want[c.Name] = true
		}
	}
	var out []Recipe
	for _, r := range catalog {
		if len(names) == 0 || want[r.Name] {
			out = append(out, r)
		}
	}
	return out, nil
}

// BuildAll builds the named catalog images (all when empty) and the images they are
// layered on: up to Parallel at once, each once the image it is layered on is built,
// the .debs of every image downloaded ahead in the same order. After a failure it
// starts nothing more and returns what was built with the error. Results are in
// catalog order.
func (b *Builder) BuildAll(ctx context.Context, names ...string) ([]Result, error) {
	catalog := b.catalog()
	recipes, err := withBases(catalog, names)
	if err != nil {
		return nil, err
	}
	sess := newSession(b)
	sess.staleOK = b.RefreshLater
	plan, err := b.plan(ctx, catalog, recipes, sess)
	if err != nil {
		return nil, err
	}
	stale := sess.usedStale.Load()
	if stale && !allCached(plan) {
		// Something to build: it is built from current lists.
		sess = newSession(b)
		if plan, err = b.plan(ctx, catalog, recipes, sess); err != nil {
			return nil, err
		}
		stale = false
	}
	b.cleanOnce.Do(func() {
		if err := b.cleanStaleWork(); err != nil {
			b.logger().Warn("what an interrupted build left", "err", err)
		}
	})
	order := buildOrder(plan)
	sess.prefetch(ctx, order)
	results, err := sess.run(ctx, order, b.parallel())
	var out []Result
	for _, r := range recipes {
		if res, ok := results[r.Name]; ok {
			out = append(out, res)
		}
	}
	if err == nil {
		b.pruneDebs(plan)
	}
	if stale {
		b.refreshBehind(recipes)
	}
	return out, err
}

// allCached says whether the store holds every planned image at its key (pure).
func allCached(plan []planned) bool {
	for _, p := range plan {
		if !p.cached {
			return false
		}
	}
	return true
}

// refreshBehind refreshes, in the background, the lists of the recipes' suites that
// BuildAll used stale (one refresh at a time; WaitRefresh waits for it).
func (b *Builder) refreshBehind(recipes []Recipe) {
	if !b.refreshing.CompareAndSwap(false, true) {
		return
	}
	suites := map[string]bool{}
	for _, r := range recipes {
		if r.Kind == KindDebian {
			suites[r.Suite] = true
		}
	}
	b.refreshWG.Add(1)
	go func() {
		defer b.refreshWG.Done()
		defer b.refreshing.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		for suite := range suites {
			t0 := time.Now()
			apt, err := b.aptDir(suite)
			if err == nil {
				err = b.refresh(ctx, apt)
			}
			if err != nil {
				b.logger().Warn("refreshing the package lists after using them stale", "suite", suite, "err", err)
				continue
			}
			b.logger().Info("package lists refreshed after using them stale", "suite", suite, "took", time.Since(t0).Round(time.Millisecond))
		}
	}()
}

// WaitRefresh waits for the background refresh of the package lists, if one runs.
func (b *Builder) WaitRefresh() { b.refreshWG.Wait() }

func (b *Builder) parallel() int {
	if b.Parallel > 0 {
		return b.Parallel
	}
	return 2
}

// plan resolves every recipe (its cache key and package versions) and says which the
// store already holds.
func (b *Builder) plan(ctx context.Context, catalog []Recipe, recipes []Recipe, sess *session) ([]planned, error) {
	store, err := b.Store()
	if err != nil {
		return nil, err
	}
	deps := dependants(catalog)
	out := make([]planned, len(recipes))
	errs := make([]error, len(recipes))
	// Each resolution is one apt-get on one core (seconds for the large images): they
	// run side by side, as many as there are cores.
	idx := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < runtime.NumCPU(); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				r := recipes[i]
				key, vers, err := b.cacheKey(ctx, r, sess)
				if err != nil {
					errs[i] = fmt.Errorf("build %s: %w", r.Name, err)
					continue
				}
				_, st, err := store.Get(r.Name)
				cached := err == nil && st.CacheKey == key && st.Ref == r.Ref
				out[i] = planned{r: r, vers: vers, cached: cached, weight: deps[r.Name], ordinal: i}
			}
		}()
	}
	for i := range recipes {
		idx <- i
	}
	close(idx)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// run builds order with up to n at once, each once its base is done.
func (s *session) run(ctx context.Context, order []planned, n int) (map[string]Result, error) {
	results := map[string]Result{}
	done := map[string]bool{}
	started := map[string]bool{}
	type outcome struct {
		name string
		res  Result
		err  error
	}
	finished := make(chan outcome)
	running := 0
	var firstErr error
	for {
		for _, p := range order {
			if running >= n || firstErr != nil || ctx.Err() != nil {
				break
			}
			if started[p.r.Name] || (p.r.Base != "" && inPlan(order, p.r.Base) && !done[p.r.Base]) {
				continue
			}
			started[p.r.Name] = true
			running++
			go func(r Recipe) {
				res, err := s.build(ctx, r)
				if err == nil && s.b.Built != nil {
					s.b.Built(res)
				}
				finished <- outcome{r.Name, res, err}
			}(p.r)
		}
		if running == 0 {
			break
		}
		o := <-finished
		running--
		if o.err != nil {
			if firstErr == nil {
				firstErr = o.err
			}
			continue
		}
		done[o.name] = true
		results[o.name] = o.res
	}
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return results, firstErr
}

func inPlan(order []planned, name string) bool {
	for _, p := range order {
		if p.r.Name == name {
			return true
		}
	}
	return false
}
