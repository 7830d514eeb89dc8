package bootstrap

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/store"
)

func TestBackoff(t *testing.T) {
	r := Retry{First: time.Second, Max: 10 * time.Second}
	var got []time.Duration
	for n := 1; n <= 6; n++ {
		got = append(got, r.Backoff(n))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Backoff(1..6) = %v, want %v", got, want)
		}
	}
	if d := (Retry{}).Backoff(1); d != 5*time.Second {
		t.Errorf("default Backoff(1) = %s, want 5s", d)
	}
}

func TestValidate(t *testing.T) {
	run := func(context.Context) (bool, string, error) { return false, "", nil }
	for _, c := range []struct {
		steps []Step
		want  string
	}{
		{[]Step{{Name: "a", Run: run}, {Name: "b", Needs: []string{"a"}, Run: run}}, ""},
		{[]Step{{Name: "a", Needs: []string{"x"}, Run: run}}, `needs "x", which is not in the plan`},
		{[]Step{{Name: "a", Needs: []string{"b"}, Run: run}, {Name: "b", Needs: []string{"a"}, Run: run}}, "need each other"},
		{[]Step{{Name: "a", Run: run}, {Name: "a", Run: run}}, "appears twice"},
	} {
		err := Validate(c.steps)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("Validate(%v) = %v, want %q", c.steps, err, c.want)
		}
	}
}

// recorder keeps the events of a run, safe for concurrent steps.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) add(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) finished() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if e.Done && e.Error == "" {
			out = append(out, e.Step)
		}
	}
	return out
}

// TestGraphKeepsGoingPastAFailingStep is the boot converge's case: libvirt fails twice and
// succeeds on its third attempt; Kubernetes and what needs it do not wait for it, compute
// does, and every attempt is journaled.
func TestGraphKeepsGoingPastAFailingStep(t *testing.T) {
	ctx := context.Background()
	db, err := store.OpenMemory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mu sync.Mutex
	libvirtTries := 0
	ok := func(context.Context) (bool, string, error) { return true, "", nil }
	steps := []Step{
		{Name: "libvirt", Run: func(context.Context) (bool, string, error) {
			mu.Lock()
			defer mu.Unlock()
			if libvirtTries++; libvirtTries < 3 {
				return false, "", errors.New("libvirtd: pidfile held")
			}
			return true, "", nil
		}},
		{Name: "kubernetes", Run: ok},
		{Name: "openstack", Needs: []string{"kubernetes"}, Run: ok},
		{Name: "compute", Needs: []string{"libvirt", "openstack"}, Run: ok},
	}
	rec := &recorder{}
	err = ExecuteGraph(ctx, db, "boot", steps, Retry{First: 20 * time.Millisecond, Max: 50 * time.Millisecond}, rec.add)
	if err != nil {
		t.Fatalf("ExecuteGraph() = %v, want nil", err)
	}
	order := strings.Join(rec.finished(), ",")
	if !strings.HasPrefix(order, "kubernetes,openstack") || !strings.HasSuffix(order, "libvirt,compute") {
		t.Errorf("steps finished in order %s, want kubernetes and openstack first, compute after libvirt", order)
	}
	var retries []time.Duration
	for _, e := range rec.events {
		if e.Step == "libvirt" && e.Done && e.Error != "" {
			retries = append(retries, e.RetryIn)
		}
	}
	if len(retries) != 2 || retries[0] != 20*time.Millisecond || retries[1] != 40*time.Millisecond {
		t.Errorf("libvirt's failed attempts said retry in %v, want 20ms then 40ms", retries)
	}
	entries, _ := db.RecentJournal(ctx, 0)
	if len(entries) != 6 {
		t.Errorf("journal has %d entries, want 6 (every attempt)", len(entries))
	}
}

// TestGraphGivesUp: with a bounded retry, a step that keeps failing fails the run; the
// steps that need it are not run, the others are.
func TestGraphGivesUp(t *testing.T) {
	ctx := context.Background()
	db, _ := store.OpenMemory(ctx)
	defer db.Close()
	ran := map[string]bool{}
	var mu sync.Mutex
	step := func(name string, err error) func(context.Context) (bool, string, error) {
		return func(context.Context) (bool, string, error) {
			mu.Lock()
			ran[name] = true
			mu.Unlock()
			return false, "", err
		}
	}
	steps := []Step{
		{Name: "ovs", Run: step("ovs", errors.New("no ovsdb"))},
		{Name: "external", Needs: []string{"ovs"}, Run: step("external", nil)},
		{Name: "dayone", Needs: []string{"external"}, Run: step("dayone", nil)},
		{Name: "kubernetes", Run: step("kubernetes", nil)},
	}
	err := ExecuteGraph(ctx, db, "r", steps, Retry{Attempts: 2, First: time.Millisecond}, nil)
	if err == nil || !strings.Contains(err.Error(), "step ovs: no ovsdb") || !strings.Contains(err.Error(), "not run, they need it: external, dayone") {
		t.Fatalf("ExecuteGraph() = %v, want ovs's failure and the steps it stopped", err)
	}
	if !ran["kubernetes"] || ran["external"] || ran["dayone"] {
		t.Errorf("ran %v, want kubernetes but neither external nor dayone", ran)
	}
}

// TestGraphRunsIndependentStepsTogether: two independent steps that each wait for the
// other to have started finish only if they run at the same time.
func TestGraphRunsIndependentStepsTogether(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	db, _ := store.OpenMemory(context.Background())
	defer db.Close()
	a, b := make(chan struct{}), make(chan struct{})
	meet := func(mine, other chan struct{}) func(context.Context) (bool, string, error) {
		return func(ctx context.Context) (bool, string, error) {
			close(mine)
			select {
			case <-other:
				return false, "", nil
			case <-ctx.Done():
				return false, "", ctx.Err()
			}
		}
	}
	err := ExecuteGraph(ctx, db, "r", []Step{{Name: "a", Run: meet(a, b)}, {Name: "b", Run: meet(b, a)}}, Retry{Attempts: 1}, nil)
	if err != nil {
		t.Fatalf("ExecuteGraph() = %v, want both steps done together", err)
	}
}
