package images

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	bimages "github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/daemon/api"
)

// importer imports the images the build step queues as soon as containerd runs, the one
// the deployment needs first among those waiting (nextImport); it ends when the queue is
// closed and drained or its run ends.
type importer struct {
	s       *Service
	wake    chan struct{} // one pending signal: an image queued or the queue closed
	done    chan struct{}
	mu      sync.Mutex
	pending []string
	closed  bool
	n       int
	err     error
}

// newImporter starts the importer of a build step (replacing the previous one) and
// forgets the previous run's profile.
func (s *Service) newImporter(ctx context.Context) *importer {
	imp := &importer{s: s, wake: make(chan struct{}, 1), done: make(chan struct{})}
	s.mu.Lock()
	s.imp, s.runs = imp, map[string]*imageProfile{}
	s.mu.Unlock()
	go imp.run(ctx)
	return imp
}

func (imp *importer) add(name string) {
	imp.mu.Lock()
	if imp.err == nil { // after a failure the images step imports what is left
		imp.pending = append(imp.pending, name)
	}
	imp.mu.Unlock()
	imp.signal()
}

func (imp *importer) close() {
	imp.mu.Lock()
	imp.closed = true
	imp.mu.Unlock()
	imp.signal()
}

func (imp *importer) signal() {
	select {
	case imp.wake <- struct{}{}:
	default:
	}
}

// next waits for a queued image and for containerd, then takes the waiting image the
// deployment needs first; false once the queue is closed and empty or ctx ended.
func (imp *importer) next(ctx context.Context) (string, bool) {
	for {
		imp.mu.Lock()
		n, closed := len(imp.pending), imp.closed
		imp.mu.Unlock()
		if n == 0 && closed {
			return "", false
		}
		if n > 0 && imp.s.st.Node.ContainerdRunning() {
			imp.mu.Lock()
			var name string
			name, imp.pending = nextImport(imp.pending)
			imp.mu.Unlock()
			return name, true
		}
		wait := time.After(500 * time.Millisecond) // containerd's start is polled
		if n == 0 {
			wait = nil
		}
		select {
		case <-ctx.Done():
			imp.fail(ctx.Err())
			return "", false
		case <-imp.wake:
		case <-wait:
		}
	}
}

func (imp *importer) run(ctx context.Context) {
	defer close(imp.done)
	for {
		name, ok := imp.next(ctx)
		if !ok {
			return
		}
		got, err := imp.s.ImportStored(ctx, name)
		imp.mu.Lock()
		imp.n += len(got)
		imp.mu.Unlock()
		if err != nil {
			imp.fail(err)
			return
		}
	}
}

// importOrder is the order in which the releases need the images: the small ones of the
// first releases (CoreDNS, MariaDB, Memcached, RabbitMQ, OVN's databases), then openstack
// (every OpenStack release; its import is the longest), ceph (Glance and Cinder wait for
// the Ceph release), and compute (nova-compute, in the last release of the critical path).
// Imported one at a time, a large image queued first held back the small ones behind it:
// MariaDB's release, at the head of every OpenStack service's dependencies, waited for it.
var importOrder = []string{"coredns", "mariadb", "memcached", "rabbitmq", "ovn", "openstack", "ceph", "compute"}

// nextImport takes the image of pending to import first (pure): the earliest in
// importOrder, then (images it does not name) the first queued.
func nextImport(pending []string) (string, []string) {
	rank := func(name string) int {
		if i := slices.Index(importOrder, name); i >= 0 {
			return i
		}
		return len(importOrder)
	}
	best := 0
	for i, n := range pending {
		if rank(n) < rank(pending[best]) {
			best = i
		}
	}
	name := pending[best]
	return name, slices.Delete(slices.Clone(pending), best, best+1)
}

func (imp *importer) fail(err error) {
	imp.mu.Lock()
	defer imp.mu.Unlock()
	if imp.err == nil {
		imp.err = err
	}
}

// wait waits for the importer to end and returns how many images it imported.
func (imp *importer) wait(ctx context.Context) (int, error) {
	select {
	case <-imp.done:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	imp.mu.Lock()
	defer imp.mu.Unlock()
	return imp.n, imp.err
}

// imageProfile is one image's build and import in the current run.
type imageProfile struct {
	cached         bool
	steps          []bimages.StepTime
	imported, done time.Time // the import's start and end
}

func (s *Service) recordBuild(r bimages.Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runs == nil {
		s.runs = map[string]*imageProfile{}
	}
	s.runs[r.Name] = &imageProfile{cached: r.Cached, steps: r.Steps}
	if !r.Cached && s.available != nil {
		s.available[r.Name] = false // a new digest: not in containerd until imported
	}
}

func (s *Service) recordImport(name string, start, end time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runs == nil {
		s.runs = map[string]*imageProfile{}
	}
	p := s.runs[name]
	if p == nil {
		p = &imageProfile{cached: true}
		s.runs[name] = p
	}
	p.imported, p.done = start, end
}

// Profile is every image of the current (or last) run: its build steps and its import,
// as spans from since, sorted by name.
func (s *Service) Profile(since time.Time) []api.ImageProfile {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []api.ImageProfile
	for name, p := range s.runs {
		ip := api.ImageProfile{Name: name, Cached: p.cached}
		if r, ok := bimages.RecipeByName(name); ok {
			ip.Base = r.Base
		}
		for _, st := range p.steps {
			ip.Phases = append(ip.Phases, api.Span{Name: st.Step, Start: st.Start.Sub(since), Took: st.Duration})
		}
		if !p.imported.IsZero() {
			ip.Phases = append(ip.Phases, api.Span{Name: "import", Start: p.imported.Sub(since), Took: p.done.Sub(p.imported)})
		}
		out = append(out, ip)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
