package images

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Build trees and layer files under StateDir/work carry the builder's process id in
// their names (workName), so that a builder can tell what a killed process left behind
// (a daemon killed in the middle of a build leaves its tree, the tree's mounts, and the
// tools it ran, which go on in a chroot nobody waits for) from the builds of a process
// that still runs.

// workName is the prefix of a build tree or layer file of image name made by this
// process: "<name>.<pid>.".
func workName(name string) string {
	return fmt.Sprintf("%s.%d.", name, os.Getpid())
}

// workOwner is the process id in a work entry's name, or 0 when it has none (an entry
// of an older build, which no running build uses).
func workOwner(entry string) int {
	parts := strings.Split(entry, ".")
	if len(parts) < 3 {
		return 0
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// processAlive reports whether a process with that id exists.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// staleWork lists the entries of dir (StateDir/work) whose process is gone: pid is
// this process, alive says whether another one runs.
func staleWork(entries []string, self int, alive func(int) bool) []string {
	var out []string
	for _, e := range entries {
		switch owner := workOwner(e); {
		case owner == self:
		case owner != 0 && alive(owner):
		default:
			out = append(out, e)
		}
	}
	return out
}

// cleanStaleWork removes what builds of processes that are gone left under
// StateDir/work: it kills the processes still working in such a tree (their root,
// working directory or command line is in it), detaches the tree's mounts, and removes
// it. Builds of this process and of other running processes are left alone.
func (b *Builder) cleanStaleWork() error {
	dir := filepath.Join(b.releaseDir(), "work")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	var errs []error
	for _, name := range staleWork(names, os.Getpid(), processAlive) {
		path := filepath.Join(dir, name)
		killWorkingIn(path)
		if err := removeTree(path); err != nil {
			errs = append(errs, err)
			continue
		}
		b.logger().Info("removed what an interrupted build left", "path", path)
	}
	return errors.Join(errs...)
}

// killWorkingIn kills (SIGKILL) every other process whose root, working directory or
// command line lies in dir.
func killWorkingIn(dir string) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if usesDir(pid, dir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func usesDir(pid int, dir string) bool {
	in := func(p string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	for _, link := range []string{"root", "cwd"} {
		if t, err := os.Readlink(fmt.Sprintf("/proc/%d/%s", pid, link)); err == nil && in(t) {
			return true
		}
	}
	cl, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	for _, arg := range bytes.Split(cl, []byte{0}) {
		if strings.Contains(string(arg), dir) {
			return true
		}
	}
	return false
}
