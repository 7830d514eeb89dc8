package k3s

import (
	"runtime/debug"
	"testing"
)

func TestTuneGC(t *testing.T) {
	t.Setenv("GOGC", "")
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	TuneGC(true)
	if got := debug.SetGCPercent(100); got != BusyGCPercent {
		t.Errorf("busy: GOGC %d, want %d", got, BusyGCPercent)
	}
	TuneGC(false)
	if got := debug.SetGCPercent(100); got != IdleGCPercent {
		t.Errorf("idle: GOGC %d, want %d", got, IdleGCPercent)
	}
	t.Setenv("GOGC", "80")
	TuneGC(false)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC set: the collector was changed to %d", got)
	}
}
