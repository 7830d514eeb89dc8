package operations

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/api"
)

func waitDone(t *testing.T, m *Manager, id string) api.Operation {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if op, _ := m.Get(id); op.Done() {
			return op
		}
	}
	t.Fatalf("operation %s not done after 5s", id)
	return api.Operation{}
}

func TestOperations(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	m := New(ctx, &wg)

	ok, _ := m.Start("build", false, func(ctx context.Context, emit func(string)) (any, error) {
		emit("step 1")
		emit("step 2")
		return "result", nil
	})
	got := waitDone(t, m, ok.ID)
	if got.State != api.OperationSucceeded || got.Result != "result" || strings.Join(got.Events, ",") != "step 1,step 2" || got.Finished.IsZero() {
		t.Errorf("finished operation = %+v, want succeeded with its result and events", got)
	}

	bad, _ := m.Start("build", false, func(context.Context, func(string)) (any, error) { return nil, errors.New("boom") })
	if got := waitDone(t, m, bad.ID); got.State != api.OperationFailed || got.Error != "boom" {
		t.Errorf("failed operation = %+v, want failed: boom", got)
	}

	// One init at a time: a second unique start returns the running one.
	release := make(chan struct{})
	first, started := m.Start("init", true, func(ctx context.Context, emit func(string)) (any, error) {
		select {
		case <-release:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	second, again := m.Start("init", true, func(context.Context, func(string)) (any, error) { return nil, nil })
	if !started || again || second.ID != first.ID {
		t.Errorf("unique start while one runs = %s (started %v), want the running %s", second.ID, again, first.ID)
	}
	if r, ok := m.Running("init"); !ok || r.ID != first.ID {
		t.Errorf("Running(init) = %+v, %v, want %s", r, ok, first.ID)
	}
	if err := m.Cancel(first.ID); err != nil {
		t.Fatalf("Cancel() = %v", err)
	}
	if got := waitDone(t, m, first.ID); got.State != api.OperationCancelled {
		t.Errorf("cancelled operation = %+v, want cancelled", got)
	}
	if err := m.Cancel(first.ID); err == nil {
		t.Error("Cancel(finished) = nil, want a conflict")
	}
	if err := m.Cancel("nope"); err == nil {
		t.Error("Cancel(unknown) = nil, want not found")
	}
	if list := m.List(); len(list) != 3 || list[0].ID != ok.ID || list[0].Events != nil {
		t.Errorf("List() = %+v, want 3 operations oldest first without events", list)
	}

	// The daemon stopping ends running work; that is a failure, not a cancellation.
	last, _ := m.Start("launch", false, func(ctx context.Context, _ func(string)) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	stop()
	wg.Wait()
	if got, _ := m.Get(last.ID); got.State != api.OperationFailed {
		t.Errorf("operation ended by the daemon stopping = %+v, want failed", got)
	}
	close(release)
}

func TestPrune(t *testing.T) {
	var wg sync.WaitGroup
	m := New(context.Background(), &wg)
	for range maxDone + 20 {
		op, _ := m.Start("x", false, func(context.Context, func(string)) (any, error) { return nil, nil })
		waitDone(t, m, op.ID)
	}
	m.Start("x", false, func(context.Context, func(string)) (any, error) { return nil, nil })
	wg.Wait()
	if n := len(m.List()); n > maxDone+1 {
		t.Errorf("operations kept = %d, want at most %d", n, maxDone+1)
	}
}
