package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Retry is how a run retries a failed step: after First, doubling up to Max, at most
// Attempts times in all (0: until the run's context ends).
type Retry struct {
	Attempts int
	First    time.Duration
	Max      time.Duration
}

// Backoff is the wait before attempt n+1 after n failed attempts (pure).
func (r Retry) Backoff(n int) time.Duration {
	first, max := r.First, r.Max
	if first <= 0 {
		first = 5 * time.Second
	}
	if max <= 0 {
		max = 5 * time.Minute
	}
	d := first
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

// more reports whether a step that failed n times gets another attempt.
func (r Retry) more(n int) bool { return r.Attempts == 0 || n < r.Attempts }

// Validate checks a plan (pure): named, unique steps, needs that name steps of the plan,
// and no cycle.
func Validate(steps []Step) error {
	index := map[string]int{}
	for i, s := range steps {
		if s.Name == "" || s.Run == nil {
			return fmt.Errorf("invalid plan: a step without a name or action")
		}
		if _, dup := index[s.Name]; dup {
			return fmt.Errorf("invalid plan: step %q appears twice", s.Name)
		}
		index[s.Name] = i
	}
	for _, s := range steps {
		for _, n := range s.Needs {
			if _, ok := index[n]; !ok {
				return fmt.Errorf("invalid plan: step %q needs %q, which is not in the plan", s.Name, n)
			}
		}
	}
	// A cycle leaves steps that can never become ready.
	done := map[string]bool{}
	for progress := true; progress; {
		progress = false
		for _, s := range steps {
			if !done[s.Name] && needsMet(s, done) {
				done[s.Name], progress = true, true
			}
		}
	}
	if len(done) != len(steps) {
		var stuck []string
		for _, s := range steps {
			if !done[s.Name] {
				stuck = append(stuck, s.Name)
			}
		}
		return fmt.Errorf("invalid plan: steps %v need each other", stuck)
	}
	return nil
}

func needsMet(s Step, done map[string]bool) bool {
	for _, n := range s.Needs {
		if !done[n] {
			return false
		}
	}
	return true
}

// outcome is one finished attempt.
type outcome struct {
	i   int
	ev  Event
	err error
}

// ExecuteGraph runs the steps of a plan under the run id, journaling every attempt: each
// step as soon as the steps it needs have succeeded, independent steps at the same time.
// A failed step is tried again after retry's backoff while the others go on; the steps
// that need it wait for it. It returns nil once every step succeeded, or, when no step
// can go on any more, the failures (the steps that need a failed step are not run).
func ExecuteGraph(ctx context.Context, j Journal, run string, steps []Step, retry Retry, progress func(Event)) error {
	if progress == nil {
		progress = func(Event) {}
	}
	if err := Validate(steps); err != nil {
		return err
	}
	g := &graph{ctx: ctx, j: j, run: run, steps: steps, retry: retry, progress: progress,
		done: map[string]bool{}, attempts: make([]int, len(steps)), next: make([]time.Time, len(steps)),
		running: make([]bool, len(steps)), failed: map[string]error{}, results: make(chan outcome)}
	return g.loop()
}

type graph struct {
	ctx      context.Context
	j        Journal
	run      string
	steps    []Step
	retry    Retry
	progress func(Event)
	done     map[string]bool
	attempts []int
	next     []time.Time // when a failed step may run again
	running  []bool
	failed   map[string]error // steps that gave up
	results  chan outcome
}

func (g *graph) loop() error {
	inFlight := 0
	for {
		if g.ctx.Err() == nil {
			inFlight += g.startReady()
		}
		if inFlight == 0 {
			if err := g.ctx.Err(); err != nil {
				return err
			}
			if len(g.done) == len(g.steps) {
				return nil
			}
			if !g.waiting() {
				return g.failure()
			}
		}
		wait := g.untilNextRetry()
		select {
		case o := <-g.results:
			inFlight--
			g.finish(o)
		case <-time.After(wait):
		case <-g.ctx.Done():
			if inFlight == 0 {
				return g.ctx.Err()
			}
			o := <-g.results
			inFlight--
			g.finish(o)
		}
	}
}

// startReady starts every step whose needs succeeded and whose (re)try time has come.
func (g *graph) startReady() int {
	started := 0
	now := time.Now()
	for i, s := range g.steps {
		if g.done[s.Name] || g.running[i] || g.failed[s.Name] != nil || now.Before(g.next[i]) || !needsMet(s, g.done) {
			continue
		}
		g.running[i] = true
		g.attempts[i]++
		started++
		go g.attempt(i)
	}
	return started
}

// attempt runs one attempt of step i, journaled, and reports it on results.
func (g *graph) attempt(i int) {
	s := g.steps[i]
	ev := Event{Step: s.Name, Index: i + 1, Total: len(g.steps), Attempt: g.attempts[i]}
	id, err := g.j.BeginStep(g.ctx, g.run, s.Name)
	if err != nil {
		ev.Done, ev.Error = true, err.Error()
		g.results <- outcome{i: i, ev: ev, err: fmt.Errorf("journal step %s: %w", s.Name, err)}
		return
	}
	g.progress(ev)
	t0 := time.Now()
	changed, detail, runErr := safeRun(g.ctx, s)
	ev.Done, ev.Changed, ev.Detail, ev.Took = true, changed, detail, time.Since(t0)
	if runErr != nil {
		ev.Error = runErr.Error()
	}
	// Journal with a fresh context: a cancelled run must still record how its step ended.
	jctx, cancel := context.WithTimeout(context.WithoutCancel(g.ctx), 10*time.Second)
	endErr := g.j.EndStep(jctx, id, runErr)
	cancel()
	if runErr == nil && endErr != nil {
		runErr = fmt.Errorf("journal step %s: %w", s.Name, endErr)
	}
	g.results <- outcome{i: i, ev: ev, err: runErr}
}

// finish records an attempt's outcome: done, retried later, or given up.
func (g *graph) finish(o outcome) {
	g.running[o.i] = false
	s := g.steps[o.i]
	if o.err == nil {
		g.done[s.Name] = true
		g.progress(o.ev)
		return
	}
	if g.ctx.Err() == nil && g.retry.more(g.attempts[o.i]) {
		wait := g.retry.Backoff(g.attempts[o.i])
		g.next[o.i] = time.Now().Add(wait)
		o.ev.RetryIn = wait
	} else {
		g.failed[s.Name] = &StepError{Step: s.Name, Err: o.err}
	}
	g.progress(o.ev)
}

// waiting reports whether some step can still run (now or after a retry's wait).
func (g *graph) waiting() bool {
	for _, s := range g.steps {
		if !g.done[s.Name] && g.failed[s.Name] == nil && !g.blocked(s, map[string]bool{}) {
			return true
		}
	}
	return false
}

// blocked reports whether s needs, directly or not, a step that gave up.
func (g *graph) blocked(s Step, seen map[string]bool) bool {
	for _, n := range s.Needs {
		if g.failed[n] != nil {
			return true
		}
		if seen[n] {
			continue
		}
		seen[n] = true
		i := slices.IndexFunc(g.steps, func(x Step) bool { return x.Name == n })
		if g.blocked(g.steps[i], seen) {
			return true
		}
	}
	return false
}

// untilNextRetry is how long until the earliest retry is due (a minute when none is).
func (g *graph) untilNextRetry() time.Duration {
	wait := time.Minute
	now := time.Now()
	for i, s := range g.steps {
		if g.done[s.Name] || g.running[i] || g.failed[s.Name] != nil || g.next[i].IsZero() {
			continue
		}
		wait = min(wait, max(g.next[i].Sub(now), 0))
	}
	return wait
}

// failure is the run's error: every step that gave up, in plan order, and what they stop.
func (g *graph) failure() error {
	var errs []error
	for _, s := range g.steps {
		if err := g.failed[s.Name]; err != nil {
			errs = append(errs, err)
		}
	}
	var stopped []string
	for _, s := range g.steps {
		if !g.done[s.Name] && g.failed[s.Name] == nil {
			stopped = append(stopped, s.Name)
		}
	}
	err := errors.Join(errs...)
	if len(stopped) > 0 {
		err = fmt.Errorf("%w (not run, they need it: %s)", err, strings.Join(stopped, ", "))
	}
	return err
}
