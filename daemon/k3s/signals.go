package k3s

import (
	"os"
	"os/signal"
	"time"
	_ "unsafe" // for go:linkname
)

// k3s installs its own SIGTERM/SIGINT handling (wrangler's signals package) when the
// server starts, and once its context ends every embedded component (kubelet, API server,
// scheduler, ...) calls os.Exit. If k3s saw the daemon's signals, the process would exit
// before osd could stop workloads and containerd in order. So osd detaches k3s's handler
// from the operating system's signals right after k3s installs it, and asks k3s to shut
// down (signals.RequestShutdown) as the very last step of its own stop.
//
// The variable is wrangler's; the module version is pinned in go.mod.
//
//go:linkname wranglerShutdownHandler github.com/rancher/wrangler/v3/pkg/signals.shutdownHandler
var wranglerShutdownHandler chan os.Signal

// detachSignals waits (at most timeout, or until k3s returned: done) for k3s to install
// its signal channel and then stops the delivery of operating-system signals to it; it
// reports whether it did.
func detachSignals(timeout time.Duration, done <-chan struct{}) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if ch := wranglerShutdownHandler; ch != nil {
			signal.Stop(ch)
			return true
		}
		select {
		case <-done:
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
	return false
}
