package k3s

import (
	"os"
	"runtime/debug"
)

// The garbage collector's heap growth (GOGC) of the daemon, which holds the whole embedded
// Kubernetes (API server, controllers, kubelet), and of its containerd, unless GOGC says
// otherwise. Go's default of 100 left the daemon's idle heap at ~400 MiB.
//
// Measured on an idle all-in-one cloud (2 cores): at 50 the daemon's anonymous memory was
// 343 MiB, at 25 277 MiB, for 1.2 s more of its CPU a minute (8.0 s against 6.8). During a
// converge the collector's CPU would be taken from the deployment on a small host, so the
// daemon runs at 50 while it converges and at 25 when idle (warm `osd init` took 3m39s-3m43s
// either way, within the run-to-run spread). containerd, whose environment is set once,
// stays at 50: at 25 it held 6 MiB less; whether that slowed its image imports could not be
// told (the openstack image's took 35-56 s between runs at either setting).
const (
	IdleGCPercent = 25
	BusyGCPercent = 50
)

// TuneGC sets the daemon's collector for busy (a converge running) or idle, unless the
// GOGC environment variable set it. Going idle, it also collects at once and gives the
// freed memory back to the kernel: the heap grown at 50 during the converge would otherwise
// be returned over minutes (the daemon measured 419 MiB of PSS right after a converge,
// against 392-396 MiB with 25 throughout).
func TuneGC(busy bool) {
	if os.Getenv("GOGC") != "" {
		return
	}
	if busy {
		debug.SetGCPercent(BusyGCPercent)
		return
	}
	debug.SetGCPercent(IdleGCPercent)
	debug.FreeOSMemory()
}
