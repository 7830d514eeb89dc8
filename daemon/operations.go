package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"sync"
	"time"

	"github.com/osdcloud/osd/daemon/rest"
)

// Operation is long work the API started and a client can follow: GET
// /1.0/operations/{id} answers its state and the progress events so far.
type Operation struct {
	ID       string    `json:"id"`
	Kind     string    `json:"kind"`
	State    string    `json:"state"` // running, succeeded, failed
	Events   []string  `json:"events,omitempty"`
	Error    string    `json:"error,omitempty"`
	Result   any       `json:"result,omitempty"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished,omitzero"`
}

// operations keeps the daemon's operations (in memory: they describe work of this
// process; the journal in the store is what survives a restart).
type operations struct {
	mu  sync.Mutex
	ops map[string]*Operation
}

// start runs work in the background as a new operation and returns it. The work reports
// progress through its emit function.
func (o *operations) start(ctx context.Context, wg *sync.WaitGroup, kind string, work func(ctx context.Context, emit func(string)) (any, error)) Operation {
	b := make([]byte, 8)
	rand.Read(b)
	op := &Operation{ID: hex.EncodeToString(b), Kind: kind, State: "running", Started: time.Now()}
	o.mu.Lock()
	if o.ops == nil {
		o.ops = map[string]*Operation{}
	}
	o.ops[op.ID] = op
	snap := *op
	o.mu.Unlock()
	emit := func(s string) {
		o.mu.Lock()
		defer o.mu.Unlock()
		op.Events = append(op.Events, s)
		if len(op.Events) > 1000 {
			op.Events = op.Events[len(op.Events)-1000:]
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		res, err := work(ctx, emit)
		o.mu.Lock()
		defer o.mu.Unlock()
		op.Finished, op.Result = time.Now(), res
		if err != nil {
			op.State, op.Error = "failed", err.Error()
		} else {
			op.State = "succeeded"
		}
	}()
	return snap
}

func (o *operations) get(id string) (Operation, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	op, ok := o.ops[id]
	if !ok {
		return Operation{}, false
	}
	c := *op
	c.Events = append([]string(nil), op.Events...)
	return c, true
}

func (d *Daemon) getOperation(r *http.Request) rest.Response {
	op, ok := d.ops.get(rest.Var(r, "id"))
	if !ok {
		return rest.ErrorResponse(rest.Errorf(rest.ErrNotFound, "no operation %q (operations are kept until the daemon restarts)", rest.Var(r, "id")))
	}
	return rest.SyncResponse(op)
}
