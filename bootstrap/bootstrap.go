// Package bootstrap owns how a host becomes (and after every reboot becomes again) an osd
// node: the ordered, idempotent steps of `osd init` and the executor that runs them with
// a journal, so that a crash at any point is followed by a run that picks up and converges.
// The steps' host work lives in netsetup, hypervisor, bootstrap/preflight, bootstrap/images
// and bootstrap/deploy; the daemon composes them into a plan.
package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/osdcloud/osd/daemon/api"
)

// Step is one idempotent step: Run checks the host and changes only what differs from
// the desired state, reporting whether it changed anything.
type Step struct {
	Name string
	Run  func(ctx context.Context) (changed bool, detail string, err error)
}

// Journal records steps as they start and end (the daemon's SQLite store implements it).
type Journal interface {
	BeginStep(ctx context.Context, run, step string) (int64, error)
	EndStep(ctx context.Context, id int64, stepErr error) error
}

// Event is a progress report: a step started (Done false) or ended.
type Event = api.Step

// StepError says which step failed.
type StepError struct {
	Step string
	Err  error
}

func (e *StepError) Error() string { return fmt.Sprintf("step %s: %v", e.Step, e.Err) }
func (e *StepError) Unwrap() error { return e.Err }

// Execute runs steps in order under the run id, journaling each, and stops at the first
// failure. A step whose journal entry cannot be written is not run: the journal is what
// lets the next run know where this one stood.
func Execute(ctx context.Context, j Journal, run string, steps []Step, progress func(Event)) error {
	if progress == nil {
		progress = func(Event) {}
	}
	seen := map[string]bool{}
	for _, s := range steps {
		if s.Name == "" || s.Run == nil {
			return fmt.Errorf("invalid plan: a step without a name or action")
		}
		if seen[s.Name] {
			return fmt.Errorf("invalid plan: step %q appears twice", s.Name)
		}
		seen[s.Name] = true
	}
	for i, s := range steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		id, err := j.BeginStep(ctx, run, s.Name)
		if err != nil {
			return fmt.Errorf("journal step %s: %w", s.Name, err)
		}
		progress(Event{Step: s.Name, Index: i + 1, Total: len(steps)})
		t0 := time.Now()
		changed, detail, runErr := safeRun(ctx, s)
		ev := Event{Step: s.Name, Index: i + 1, Total: len(steps), Done: true, Changed: changed, Detail: detail, Took: time.Since(t0)}
		if runErr != nil {
			ev.Error = runErr.Error()
		}
		// Journal with a fresh context: a cancelled run must still record how its step ended.
		jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		endErr := j.EndStep(jctx, id, runErr)
		cancel()
		progress(ev)
		if runErr != nil {
			return &StepError{Step: s.Name, Err: runErr}
		}
		if endErr != nil {
			return fmt.Errorf("journal step %s: %w", s.Name, endErr)
		}
	}
	return nil
}

// safeRun turns a panicking step into an error.
func safeRun(ctx context.Context, s Step) (changed bool, detail string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.New(fmt.Sprint("panic: ", r))
		}
	}()
	return s.Run(ctx)
}
