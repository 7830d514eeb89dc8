package daemon

import (
	"fmt"
	"os"
	"path/filepath"

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
