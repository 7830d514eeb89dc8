package daemon

import (
	"log/slog"
	"os"

	"github.com/osdcloud/osd/daemon/client"
)

// keepWorkloads reports whether this stop leaves the workloads running (--keep-workloads,
// or client.RequestKeepWorkloads since the daemon started), and consumes the request (an
// older one was meant for another daemon).
func (d *Daemon) keepWorkloads() bool {
	f := client.KeepWorkloadsFile(d.cfg.RunDir)
	st, err := os.Stat(f)
	os.Remove(f)
	requested := err == nil && !st.ModTime().Before(d.started)
	if requested {
		slog.Info("leaving the workloads running, as requested")
	}
	return d.cfg.KeepWorkloads || requested
}
