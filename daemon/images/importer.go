package images

import (
	"context"
	"sort"
	"sync"
	"time"

	bimages "github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/daemon/api"
)

// importer imports the images the build step queues, in the order they are built, as
// soon as containerd runs; it ends when the queue is closed and drained or its run ends.
type importer struct {
	s     *Service
	queue chan string
	done  chan struct{}
	mu    sync.Mutex
	n     int
	err   error
}

// newImporter starts the importer of a build step (replacing the previous one) and
// forgets the previous run's profile.
func (s *Service) newImporter(ctx context.Context) *importer {
	imp := &importer{s: s, queue: make(chan string, 64), done: make(chan struct{})}
	s.mu.Lock()
	s.imp, s.runs = imp, map[string]*imageProfile{}
	s.mu.Unlock()
	go imp.run(ctx)
	return imp
}

func (imp *importer) add(name string) { imp.queue <- name }
func (imp *importer) close()          { close(imp.queue) }

func (imp *importer) run(ctx context.Context) {
	defer close(imp.done)
	for name := range imp.queue {
		for !imp.s.st.Node.ContainerdRunning() {
			select {
			case <-ctx.Done():
				imp.fail(ctx.Err())
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
		got, err := imp.s.ImportStored(ctx, name)
		imp.mu.Lock()
		imp.n += len(got)
		imp.mu.Unlock()
		if err != nil {
			imp.fail(err)
			for range imp.queue { // drain: the images step imports what is left
			}
			return
		}
	}
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
