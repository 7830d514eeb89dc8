package netsetup

import (
	"log/slog"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	// Keep test and benchmark output readable: only warnings and errors.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	os.Exit(m.Run())
}
