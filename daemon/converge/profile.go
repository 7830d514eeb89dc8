package converge

import (
	"time"

	"github.com/osdcloud/osd/daemon/api"
)

// stepSpans records when each step's last attempt ran, from the run's start.
type stepSpans struct {
	start time.Time
	spans map[string]api.Span
	order []string
}

func newStepSpans(start time.Time) *stepSpans {
	return &stepSpans{start: start, spans: map[string]api.Span{}}
}

// done records a finished attempt (its end is now).
func (s *stepSpans) done(e api.Step, now time.Time) {
	if _, ok := s.spans[e.Step]; !ok {
		s.order = append(s.order, e.Step)
	}
	s.spans[e.Step] = api.Span{Name: e.Step, Start: now.Sub(s.start) - e.Took, Took: e.Took}
}

func (s *stepSpans) list() []api.Span {
	out := make([]api.Span, 0, len(s.order))
	for _, n := range s.order {
		out = append(out, s.spans[n])
	}
	return out
}

// BuildProfile assembles a run's profile and its critical path (pure).
func BuildProfile(steps []api.Span, needs map[string][]string, images []api.ImageProfile, releases []api.ReleaseProfile) *api.Profile {
	p := &api.Profile{Steps: steps, Images: images, Releases: releases}
	p.CriticalPath = CriticalPath(steps, needs, images, releases)
	return p
}

// CriticalPath is the chain of steps that set the run's length (pure): from the step
// that ended last, back through the step it needed that ended last. The image-build step
// is shown as the chain of images that ended last (an image, then the image it is
// layered on), the openstack step as the chain of releases (the release Ready last, then
// its dependency Ready last).
func CriticalPath(steps []api.Span, needs map[string][]string, images []api.ImageProfile, releases []api.ReleaseProfile) []api.Span {
	byName := map[string]api.Span{}
	for _, s := range steps {
		byName[s.Name] = s
	}
	var chain []api.Span
	cur, ok := latest(steps)
	for ok {
		chain = append([]api.Span{cur}, chain...)
		var deps []api.Span
		for _, n := range needs[cur.Name] {
			if s, found := byName[n]; found {
				deps = append(deps, s)
			}
		}
		cur, ok = latest(deps)
	}
	var out []api.Span
	for _, s := range chain {
		switch s.Name {
		case "image-build":
			if sub := imageChain(images); len(sub) > 0 {
				out = append(out, sub...)
				continue
			}
		case "openstack":
			if sub := releaseChain(releases); len(sub) > 0 {
				out = append(out, sub...)
				continue
			}
		}
		out = append(out, s)
	}
	return out
}

// latest is the span that ended last.
func latest(spans []api.Span) (api.Span, bool) {
	var best api.Span
	found := false
	for _, s := range spans {
		if !found || s.End() > best.End() {
			best, found = s, true
		}
	}
	return best, found
}

// whole is one span from the first phase's start to the last phase's end, skipping the
// phases named in skip.
func whole(name string, phases []api.Span, skip ...string) (api.Span, bool) {
	var start, end time.Duration
	found := false
	for _, p := range phases {
		if contains(skip, p.Name) {
			continue
		}
		if !found || p.Start < start {
			start = p.Start
		}
		if !found || p.End() > end {
			end = p.End()
		}
		found = true
	}
	return api.Span{Name: name, Start: start, Took: end - start}, found
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// imageChain is the built image whose build ended last and the images below it (each
// from its build's first phase to the end of its build: waiting for the image below is
// not in it).
func imageChain(images []api.ImageProfile) []api.Span {
	spans := map[string]api.Span{}
	base := map[string]string{}
	var built []api.Span
	for _, im := range images {
		if s, ok := whole("image "+im.Name, im.Phases, "import", "resolve"); ok && !im.Cached {
			spans[im.Name], base[im.Name] = s, im.Base
			built = append(built, s)
		}
	}
	last, ok := latest(built)
	if !ok {
		return nil
	}
	var out []api.Span
	for name := last.Name[len("image "):]; name != ""; name = base[name] {
		s, ok := spans[name]
		if !ok {
			break
		}
		out = append([]api.Span{s}, out...)
	}
	return out
}

// releaseChain is the release Ready last and, back, the dependency of each that was
// Ready last (each from its Helm action to Ready).
func releaseChain(releases []api.ReleaseProfile) []api.Span {
	spans := map[string]api.Span{}
	deps := map[string][]string{}
	var all []api.Span
	for _, r := range releases {
		if s, ok := whole("release "+r.Name, r.Phases, "waiting"); ok {
			spans[r.Name], deps[r.Name] = s, r.DependsOn
			all = append(all, s)
		}
	}
	cur, ok := latest(all)
	var out []api.Span
	for ok {
		out = append([]api.Span{cur}, out...)
		var ds []api.Span
		for _, d := range deps[cur.Name[len("release "):]] {
			if s, found := spans[d]; found {
				ds = append(ds, s)
			}
		}
		cur, ok = latest(ds)
	}
	return out
}
