package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// RedirectLibraryOutput sends everything the embedded components print to the process's
// standard error (k3s, the kubelet, the API server: thousands of lines) to
// STATE/logs/k3s.log, and returns a file for osd's own log that still reaches the original
// standard error (the journal under systemd).
func RedirectLibraryOutput(stateDir string) (*os.File, error) {
	dir := filepath.Join(stateDir, "logs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create log dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "k3s.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open k3s log: %w", err)
	}
	defer f.Close()
	orig, err := unix.Dup(2)
	if err != nil {
		return nil, fmt.Errorf("dup stderr: %w", err)
	}
	unix.CloseOnExec(orig)
	if err := unix.Dup2(int(f.Fd()), 2); err != nil {
		unix.Close(orig)
		return nil, fmt.Errorf("redirect stderr: %w", err)
	}
	return os.NewFile(uintptr(orig), "stderr"), nil
}

// KeepDefaultLogger makes l slog's default logger again whenever something else replaced
// it, checking every interval until ctx ends. The embedded Kubernetes components do so as
// they start (component-base's logging options set slog's default to a klog handler, which
// writes to k3s.log): osd's own log after k3s started went to k3s.log among thousands of
// the components' lines, and no longer reached daemon.log or the journal. What osd logs in
// the interval after a replacement still goes to k3s.log.
func KeepDefaultLogger(ctx context.Context, l *slog.Logger, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if slog.Default() != l {
				slog.SetDefault(l)
				l.Debug("slog's default logger was replaced (the embedded Kubernetes components' logging): osd's set again")
			}
		}
	}
}
