// Package fsutil owns the daemon's small file primitives: atomic writes and PID lock
// files, so a crash never leaves a half-written file and two processes never share a job.
package fsutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// WriteFileAtomic writes data to path with mode through a temporary file in the same
// directory (created 0700 if missing), a sync and a rename.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// ErrLocked is returned by Lock when another process holds the lock.
var ErrLocked = errors.New("locked by another process")

// Lock takes an exclusive lock on the file at path (created 0600) and writes this
// process's PID into it; the lock dies with the process. When another process holds it,
// the error wraps ErrLocked and names that process's PID (0 if unknown).
func Lock(path string) (unlock func(), holder int, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, 0, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		pid, _ := Holder(path)
		return nil, pid, fmt.Errorf("%s: %w", path, ErrLocked)
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() {
		f.Truncate(0)
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, 0, nil
}

// Holder returns the PID of the process holding the lock at path, if one does.
func Holder(path string) (int, bool) {
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
		return 0, true
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, true
}
