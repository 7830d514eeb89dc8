package client

import (
	"fmt"
	"os"
	"path/filepath"
)

// A running daemon's stop leaves the pods running when it was started with
// --keep-workloads, or when asked to since it started: `osd daemon stop --keep-workloads`
// (what a package upgrade runs) writes RUN-DIR/keep-workloads before it stops the daemon,
// which reads it at stop.

// KeepWorkloadsFile is where the request is written.
func KeepWorkloadsFile(runDir string) string { return filepath.Join(runDir, "keep-workloads") }

// RequestKeepWorkloads asks the daemon running on runDir to leave the workloads running
// when it next stops.
func RequestKeepWorkloads(runDir string) error {
	if err := os.WriteFile(KeepWorkloadsFile(runDir), nil, 0o600); err != nil {
		return fmt.Errorf("ask the daemon to keep the workloads: %w", err)
	}
	return nil
}

// CancelKeepWorkloads withdraws a request that no daemon consumed.
func CancelKeepWorkloads(runDir string) { os.Remove(KeepWorkloadsFile(runDir)) }
