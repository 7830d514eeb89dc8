// Package bootstrap owns how a host becomes (and after every reboot becomes again) an osd
// node: the ordered, idempotent steps of `osd init` and the executor that runs them with
// a journal, so that a crash at any point is followed by a run that picks up and converges.
// The steps' host work lives in netsetup, hypervisor, bootstrap/preflight and
// bootstrap/images; the daemon composes them, with the cloud's steps (daemon/deploy,
// daemon/openstack), into a plan.
package bootstrap

import (
	"context"
	"errors"
	"fmt"

	"github.com/osdcloud/osd/daemon/api"
)

// Step is one idempotent step: Run checks the host and changes only what differs from
// the desired state, reporting whether it changed anything. It runs once every step it
// Needs has succeeded.
type Step struct {
	Name  string
	Needs []string
	Run   func(ctx context.Context) (changed bool, detail string, err error)
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
// failure (ExecuteGraph with each step needing the one before it and no retries).
func Execute(ctx context.Context, j Journal, run string, steps []Step, progress func(Event)) error {
	chain := make([]Step, len(steps))
	for i, s := range steps {
		chain[i] = Step{Name: s.Name, Run: s.Run}
		if i > 0 {
			chain[i].Needs = []string{steps[i-1].Name}
		}
	}
	return ExecuteGraph(ctx, j, run, chain, Retry{Attempts: 1}, progress)
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
