package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// lockStateDir takes an exclusive lock on the state dir so that a second daemon refuses to
// start; the lock file records the holder's PID. The lock dies with the process.
func lockStateDir(dir string) (func(), error) {
	path := filepath.Join(dir, "daemon.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		holder := "another process"
		if pid, ok := LockHolder(dir); ok {
			holder = "process " + strconv.Itoa(pid)
		}
		return nil, fmt.Errorf("another osd daemon (%s) is already running on state dir %s: stop it first (systemctl stop osd, or kill it) or use another --state-dir", holder, dir)
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() {
		f.Truncate(0)
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}

// LockHolder returns the PID of the daemon holding the state dir's lock, if one does.
func LockHolder(dir string) (int, bool) {
	path := filepath.Join(dir, "daemon.lock")
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	if unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB) == nil {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return 0, false // nobody holds it
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, err == nil && pid > 0
}
