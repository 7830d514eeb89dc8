package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/osdcloud/osd/daemon/fsutil"
)

// lockStateDir takes an exclusive lock on the state dir so that a second daemon refuses to
// start; the lock dies with the process.
func lockStateDir(dir string) (func(), error) {
	unlock, pid, err := fsutil.Lock(filepath.Join(dir, "daemon.lock"))
	if errors.Is(err, fsutil.ErrLocked) {
		return nil, fmt.Errorf("another osd daemon (pid %d) is already running on state dir %s: stop it first (systemctl stop osd, or kill it) or use another --state-dir", pid, dir)
	}
	return unlock, err
}

// LockHolder returns the PID of the daemon holding the state dir's lock, if one does.
func LockHolder(dir string) (int, bool) {
	return fsutil.Holder(filepath.Join(dir, "daemon.lock"))
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
