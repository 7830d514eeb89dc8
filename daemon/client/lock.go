package client

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/osdcloud/osd/bootstrap/fsutil"
)

// Defaults of a host install, for clients that find the daemon by its state and run dirs.
const (
	DefaultStateDir = "/var/lib/osd"
	DefaultRunDir   = "/run/osd"
)

// DaemonLockFile is the state dir's lock a running daemon holds.
const DaemonLockFile = "daemon.lock"

// LockHolder returns the PID of the daemon holding the state dir's lock, if one does.
func LockHolder(stateDir string) (int, bool) {
	return fsutil.Holder(filepath.Join(stateDir, DaemonLockFile))
}

// LockInit makes sure only one osd init runs per state dir (the CLI holds it while it
// follows the daemon's converge).
func LockInit(stateDir string) (func(), error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	unlock, pid, err := fsutil.Lock(filepath.Join(stateDir, "init.lock"))
	if errors.Is(err, fsutil.ErrLocked) {
		return nil, fmt.Errorf("another osd init (pid %d) is already running on %s: wait for it to finish, or follow it with osd status", pid, stateDir)
	}
	return unlock, err
}
