// Package fsutil owns the small file primitives: atomic writes (fsync of the file, rename,
// fsync of the directory) and PID lock files, so a crash never leaves a half-written file
// and two processes never share a job. It is the only place that writes a file through a
// temporary one renamed into place (test/atomicwrite_test.go holds the tree to that); it
// sits at the bottom of the tree (bootstrap/fsutil imports nothing of osd), so the daemon,
// bootstrap and the CLI's own host writes share it.
package fsutil

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// WriteFileAtomic writes data to path with mode through a temporary file in the same
// directory (created 0700 if missing), as WriteAtomic does.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return WriteAtomic(path, mode, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteAtomic writes path (its directory must exist) with mode through write into a
// temporary file in the same directory: the file is synced, renamed into place and the
// directory synced, so after a crash path holds its old content or all of the new, never
// a part. The temporary file is removed when anything fails.
func WriteAtomic(path string, mode os.FileMode, write func(io.Writer) error) error {
	return writeAtomic(path, mode, true, write)
}

// WriteAtomicNew is WriteAtomic that refuses to replace path: when path exists at the
// moment of the rename (RENAME_NOREPLACE), the error wraps fs.ErrExist.
func WriteAtomicNew(path string, mode os.FileMode, write func(io.Writer) error) error {
	return writeAtomic(path, mode, false, write)
}

func writeAtomic(path string, mode os.FileMode, replace bool, write func(io.Writer) error) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := write(tmp); err != nil {
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if replace {
		err = os.Rename(tmp.Name(), path)
	} else if err = unix.Renameat2(unix.AT_FDCWD, tmp.Name(), unix.AT_FDCWD, path, unix.RENAME_NOREPLACE); errors.Is(err, unix.EEXIST) {
		err = fmt.Errorf("%s: %w", path, fs.ErrExist)
	}
	if err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// CopyFile copies the file src to dst (its directory must exist) with mode, atomically as
// WriteAtomic writes. An error opening src is returned as it is (errors.Is(err,
// fs.ErrNotExist) when src is missing), and dst is then left untouched.
func CopyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return WriteAtomic(dst, mode, func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
}

// Symlink makes path a symbolic link to target, replacing what path was in one rename: the
// link is made under a temporary name in path's directory, renamed over path and the
// directory synced, so path is at every moment the old entry or the new link.
func Symlink(target, path string) error {
	dir, base := filepath.Split(path)
	for {
		tmp := filepath.Join(dir, "."+base+".tmp-"+strconv.FormatUint(rand.Uint64(), 36))
		err := os.Symlink(target, tmp)
		if errors.Is(err, fs.ErrExist) {
			continue // taken by another writer: draw another name, as os.CreateTemp does
		}
		if err != nil {
			return err
		}
		if err := os.Rename(tmp, path); err != nil {
			os.Remove(tmp)
			return err
		}
		return SyncDir(filepath.Clean(dir))
	}
}

// RenameDurable moves the file src (written and closed) to dst as WriteAtomic commits a
// file: src is synced, renamed over dst and dst's directory synced.
func RenameDurable(src, dst string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", src, err)
	}
	if err := os.Rename(src, dst); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(dst))
}

// SyncDir syncs a directory, making the names created, renamed or removed in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
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
