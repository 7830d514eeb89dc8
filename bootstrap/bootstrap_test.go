package bootstrap

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/osdcloud/osd/daemon/store"
)

func TestExecute(t *testing.T) {
	boom := errors.New("boom")
	ok := func(changed bool) func(context.Context) (bool, string, error) {
		return func(context.Context) (bool, string, error) { return changed, "", nil }
	}
	tests := []struct {
		name       string
		steps      []Step
		wantErr    string
		wantRan    []string
		wantStates []string // journal states, oldest first
	}{
		{name: "all ok", steps: []Step{{Name: "a", Run: ok(true)}, {Name: "b", Run: ok(false)}},
			wantRan: []string{"a", "b"}, wantStates: []string{"finished", "finished"}},
		{name: "stops at failure", steps: []Step{{Name: "a", Run: ok(true)}, {Name: "b", Run: func(context.Context) (bool, string, error) { return false, "", boom }}, {Name: "c", Run: ok(true)}},
			wantErr: "step b: boom", wantRan: []string{"a", "b"}, wantStates: []string{"finished", "failed"}},
		{name: "panic is an error", steps: []Step{{Name: "a", Run: func(context.Context) (bool, string, error) { panic("bad") }}},
			wantErr: "panic: bad", wantRan: []string{"a"}, wantStates: []string{"failed"}},
		{name: "duplicate step refused", steps: []Step{{Name: "a", Run: ok(true)}, {Name: "a", Run: ok(true)}}, wantErr: "appears twice"},
		{name: "unnamed step refused", steps: []Step{{Name: "", Run: ok(true)}}, wantErr: "without a name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			db, err := store.OpenMemory(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var ran []string
			err = Execute(ctx, db, "run1", tt.steps, func(e Event) {
				if !e.Done {
					ran = append(ran, e.Step)
				}
			})
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Execute() = %v, want error %q", err, tt.wantErr)
			}
			if strings.Join(ran, ",") != strings.Join(tt.wantRan, ",") {
				t.Errorf("Execute() ran %v, want %v", ran, tt.wantRan)
			}
			entries, err := db.RecentJournal(ctx, 10)
			if err != nil {
				t.Fatal(err)
			}
			var states []string
			for i := len(entries) - 1; i >= 0; i-- {
				states = append(states, entries[i].State)
			}
			if strings.Join(states, ",") != strings.Join(tt.wantStates, ",") {
				t.Errorf("journal states = %v, want %v", states, tt.wantStates)
			}
		})
	}
}

func TestExecuteCancelledRecordsFailure(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	db, err := store.OpenMemory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = Execute(ctx, db, "r", []Step{{Name: "slow", Run: func(ctx context.Context) (bool, string, error) {
		cancel()
		return false, "", ctx.Err()
	}}, {Name: "never", Run: func(context.Context) (bool, string, error) { t.Error("step after cancel ran"); return false, "", nil }}}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Execute() = %v, want context.Canceled", err)
	}
	entries, _ := db.RecentJournal(context.Background(), 10)
	if len(entries) != 1 || entries[0].State != "failed" {
		t.Errorf("journal = %+v, want one failed entry", entries)
	}
}
