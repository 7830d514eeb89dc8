package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestKeepDefaultLogger: a default logger set by someone else (as the embedded Kubernetes
// components do) is replaced by osd's again, and osd's lines reach osd's output.
func TestKeepDefaultLogger(t *testing.T) {
	orig := slog.Default()
	defer slog.SetDefault(orig)
	var ours, theirs bytes.Buffer
	l := slog.New(slog.NewTextHandler(&ours, nil))
	slog.SetDefault(l)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { KeepDefaultLogger(ctx, l, 10*time.Millisecond); close(done) }()
	defer func() { cancel(); <-done }()

	slog.SetDefault(slog.New(slog.NewTextHandler(&theirs, nil)))
	deadline := time.Now().Add(5 * time.Second)
	for slog.Default() != l {
		if time.Now().After(deadline) {
			t.Fatal("slog's default logger still someone else's 5 s after it was replaced")
		}
		time.Sleep(5 * time.Millisecond)
	}
	slog.Info("after the components started")
	if !strings.Contains(ours.String(), "after the components started") || strings.Contains(theirs.String(), "after the components started") {
		t.Errorf("osd's line went to the wrong logger: osd's output %q, the other's %q", ours.String(), theirs.String())
	}
}
