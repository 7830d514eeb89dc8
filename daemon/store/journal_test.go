package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/api"
)

func TestConfig(t *testing.T) {
	ctx := context.Background()
	d := newMemory(t)
	if v, ok, err := d.GetConfig(ctx, "missing"); v != "" || ok || err != nil {
		t.Errorf("GetConfig(missing) = %q, %v, %v, want \"\", false, nil", v, ok, err)
	}
	steps := []struct{ key, value string }{{"a", "1"}, {"a", "2"}, {"b", ""}}
	for _, s := range steps {
		if err := d.SetConfig(ctx, s.key, s.value); err != nil {
			t.Fatalf("SetConfig(%s, %s) = %v", s.key, s.value, err)
		}
		if v, ok, err := d.GetConfig(ctx, s.key); v != s.value || !ok || err != nil {
			t.Errorf("GetConfig(%s) = %q, %v, %v, want %q, true, nil", s.key, v, ok, err, s.value)
		}
	}
	if err := d.DeleteConfig(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := d.GetConfig(ctx, "a"); ok {
		t.Error("GetConfig(a) after DeleteConfig found it, want gone")
	}
	if err := d.DeleteConfig(ctx, "a"); err != nil {
		t.Errorf("DeleteConfig(missing) = %v, want nil", err)
	}
}

func TestJournalLifecycle(t *testing.T) {
	ctx := context.Background()
	d := newMemory(t)
	before := time.Now().Add(-time.Second)

	ok1, _ := d.BeginStep(ctx, "r1", "ovs")
	fail, _ := d.BeginStep(ctx, "r1", "br-ex")
	open, err := d.BeginStep(ctx, "r1", "k3s")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.EndStep(ctx, ok1, nil); err != nil {
		t.Fatalf("EndStep(ok) = %v", err)
	}
	if err := d.EndStep(ctx, fail, errors.New("ovs-vsctl: no bridge")); err != nil {
		t.Fatalf("EndStep(err) = %v", err)
	}

	got, err := d.RecentJournal(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		id     int64
		step   string
		state  string
		detail string
		ended  bool
	}{
		{open, "k3s", api.StepStarted, "", false},
		{fail, "br-ex", api.StepFailed, "ovs-vsctl: no bridge", true},
		{ok1, "ovs", api.StepFinished, "", true},
	}
	if len(got) != len(want) {
		t.Fatalf("RecentJournal(0) = %d entries, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.ID != w.id || g.Step != w.step || g.State != w.state || g.Detail != w.detail || g.Run != "r1" || (g.FinishedAt != nil) != w.ended {
			t.Errorf("RecentJournal(0)[%d] = %+v, want id %d step %s state %s detail %q ended %v", i, g, w.id, w.step, w.state, w.detail, w.ended)
		}
		if g.StartedAt.Before(before) || g.StartedAt.After(time.Now()) {
			t.Errorf("RecentJournal(0)[%d].StartedAt = %v, want about now", i, g.StartedAt)
		}
	}
	if lim, _ := d.RecentJournal(ctx, 2); len(lim) != 2 || lim[0].ID != open || lim[1].ID != fail {
		t.Errorf("RecentJournal(2) = %+v, want the two newest", lim)
	}
	if in, _ := d.InterruptedSteps(ctx); len(in) != 1 || in[0].ID != open {
		t.Errorf("InterruptedSteps() = %+v, want only %d", in, open)
	}

	if n, err := d.CloseInterruptedSteps(ctx, "the daemon stopped"); err != nil || n != 1 {
		t.Errorf("CloseInterruptedSteps() = %d, %v, want 1", n, err)
	}
	if in, _ := d.InterruptedSteps(ctx); len(in) != 0 {
		t.Errorf("InterruptedSteps() after closing = %+v, want none", in)
	}
	if got, _ := d.RecentJournal(ctx, 1); got[0].State != api.StepFailed || got[0].Detail != "the daemon stopped" || got[0].FinishedAt == nil {
		t.Errorf("closed interrupted entry = %+v, want failed: the daemon stopped", got[0])
	}
	if err := d.EndStep(ctx, ok1, nil); err == nil || !strings.Contains(err.Error(), "already finished") {
		t.Errorf("EndStep(finished entry) = %v, want already finished", err)
	}
	if err := d.EndStep(ctx, 9999, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("EndStep(9999) = %v, want ErrNotFound", err)
	}
}
