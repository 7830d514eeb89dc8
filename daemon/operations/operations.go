// Package operations is the daemon's one mechanism for long work (init, join, image
// builds, launches, ...): each runs in the background as an operation with progress
// events, can be listed, followed and cancelled, and is kept in memory (the journal in
// the store is what survives a restart).
package operations

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/rest"
)

// maxEvents bounds the events one operation keeps (the newest), maxDone the finished
// operations kept (the newest).
const (
	maxEvents = 1000
	maxDone   = 100
)

// Work is what an operation runs: it reports progress through emit and ends when ctx
// ends (cancelled, or the daemon stopping). Its result is the operation's.
type Work func(ctx context.Context, emit func(string)) (any, error)

type idKey struct{}

// ID is the id of the operation whose work runs with ctx ("" outside one).
func ID(ctx context.Context) string {
	id, _ := ctx.Value(idKey{}).(string)
	return id
}

// Manager runs and remembers operations.
type Manager struct {
	ctx context.Context // ends when the daemon stops
	wg  *sync.WaitGroup // the daemon waits for running work at stop

	mu  sync.Mutex
	ops map[string]*entry
}

type entry struct {
	op     api.Operation
	cancel context.CancelFunc
}

// New returns a manager whose operations end with ctx and are waited for through wg.
func New(ctx context.Context, wg *sync.WaitGroup) *Manager {
	return &Manager{ctx: ctx, wg: wg, ops: map[string]*entry{}}
}

// Start runs work as a new operation of kind and returns it. When unique is set and an
// operation of that kind is running, that one is returned instead and started is false
// (one init, one join at a time).
func (m *Manager) Start(kind string, unique bool, work Work) (op api.Operation, started bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if unique {
		if e := m.runningLocked(kind); e != nil {
			return m.copyLocked(e), false
		}
	}
	b := make([]byte, 8)
	rand.Read(b)
	id := hex.EncodeToString(b)
	ctx, cancel := context.WithCancel(context.WithValue(m.ctx, idKey{}, id))
	e := &entry{op: api.Operation{ID: id, Kind: kind, State: api.OperationRunning, Started: time.Now()}, cancel: cancel}
	m.ops[e.op.ID] = e
	m.pruneLocked()
	emit := func(s string) {
		m.mu.Lock()
		defer m.mu.Unlock()
		e.op.Events = append(e.op.Events, s)
		if len(e.op.Events) > maxEvents {
			e.op.Events = e.op.Events[len(e.op.Events)-maxEvents:]
		}
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer cancel()
		res, err := work(ctx, emit)
		m.mu.Lock()
		defer m.mu.Unlock()
		e.op.Finished, e.op.Result = time.Now(), res
		switch {
		case err != nil && ctx.Err() != nil && m.ctx.Err() == nil:
			e.op.State, e.op.Error = api.OperationCancelled, err.Error()
		case err != nil:
			e.op.State, e.op.Error = api.OperationFailed, err.Error()
		default:
			e.op.State = api.OperationSucceeded
		}
	}()
	return m.copyLocked(e), true
}

func (m *Manager) runningLocked(kind string) *entry {
	for _, e := range m.ops {
		if e.op.Kind == kind && e.op.State == api.OperationRunning {
			return e
		}
	}
	return nil
}

// pruneLocked forgets the oldest finished operations beyond maxDone.
func (m *Manager) pruneLocked() {
	var done []*entry
	for _, e := range m.ops {
		if e.op.State != api.OperationRunning {
			done = append(done, e)
		}
	}
	if len(done) <= maxDone {
		return
	}
	sort.Slice(done, func(i, j int) bool { return done[i].op.Started.Before(done[j].op.Started) })
	for _, e := range done[:len(done)-maxDone] {
		delete(m.ops, e.op.ID)
	}
}

func (m *Manager) copyLocked(e *entry) api.Operation {
	c := e.op
	c.Events = append([]string(nil), e.op.Events...)
	return c
}

// Get returns the operation id.
func (m *Manager) Get(id string) (api.Operation, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.ops[id]
	if !ok {
		return api.Operation{}, false
	}
	return m.copyLocked(e), true
}

// Running returns the running operation of kind, if any.
func (m *Manager) Running(kind string) (api.Operation, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.runningLocked(kind); e != nil {
		return m.copyLocked(e), true
	}
	return api.Operation{}, false
}

// List returns every operation kept, oldest first, without their events.
func (m *Manager) List() []api.Operation {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]api.Operation, 0, len(m.ops))
	for _, e := range m.ops {
		c := e.op
		c.Events = nil
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	return out
}

// Cancel asks the running operation id to stop; its work sees its context end.
func (m *Manager) Cancel(id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.ops[id]
	if !ok {
		return notFound(id)
	}
	if e.op.State != api.OperationRunning {
		return rest.Errorf(rest.ErrConflict, "operation %s already %s", id, e.op.State)
	}
	e.cancel()
	return nil
}

func notFound(id string) error {
	return rest.Errorf(rest.ErrNotFound, "no operation %q (operations are kept until the daemon restarts)", id)
}

// Endpoints are the operations' routes:
//
//	GET    /1.0/operations        -> []Operation (without events)
//	GET    /1.0/operations/{id}   -> Operation
//	DELETE /1.0/operations/{id}   cancel a running operation
func (m *Manager) Endpoints() []rest.Endpoint {
	return []rest.Endpoint{
		{Path: "operations", Get: rest.Action{Handler: func(*http.Request) rest.Response { return rest.SyncResponse(m.List()) }}},
		{Path: "operations/{id}",
			Get: rest.Action{Handler: func(r *http.Request) rest.Response {
				op, ok := m.Get(rest.Var(r, "id"))
				if !ok {
					return rest.ErrorResponse(notFound(rest.Var(r, "id")))
				}
				return rest.SyncResponse(op)
			}},
			Delete: rest.Action{Handler: func(r *http.Request) rest.Response {
				if err := m.Cancel(rest.Var(r, "id")); err != nil {
					return rest.ErrorResponse(err)
				}
				return rest.EmptySyncResponse
			}},
		},
	}
}
