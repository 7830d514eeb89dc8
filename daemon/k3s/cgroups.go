package k3s

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// cgroupMount is where the cgroup hierarchies are mounted.
var cgroupMount = "/sys/fs/cgroup"

// CgroupDirs lists the directories of cgroup root in every cgroup v1 hierarchy mounted
// under mount, or the one directory of the unified hierarchy when mount is cgroup v2
// only (pure apart from listing mount). An empty or "/" root has none.
func CgroupDirs(mount, root string) ([]string, error) {
	root = path.Clean("/" + root)
	if root == "/" {
		return nil, nil
	}
	if _, err := os.Stat(filepath.Join(mount, "cgroup.controllers")); err == nil {
		return []string{filepath.Join(mount, root)}, nil
	}
	ents, err := os.ReadDir(mount)
	if err != nil {
		return nil, fmt.Errorf("list cgroup hierarchies: %w", err)
	}
	var dirs []string
	for _, e := range ents {
		if !e.IsDir() { // "cpu,cpuacct" style names are often symlinks to a hierarchy
			continue
		}
		dirs = append(dirs, filepath.Join(mount, e.Name(), root))
	}
	return dirs, nil
}

// EnsureCgroupRoot creates the kubelet's cgroup root in every hierarchy (the kubelet
// refuses a root that does not exist). In the cpuset hierarchy it copies the parent's
// cpus and mems, without which no process could enter it.
func EnsureCgroupRoot(root string) error {
	dirs, err := CgroupDirs(cgroupMount, root)
	if err != nil {
		return err
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create cgroup root %s: %w", d, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			cur, err := os.ReadFile(filepath.Join(d, f))
			if err != nil || strings.TrimSpace(string(cur)) != "" {
				continue
			}
			parent, err := os.ReadFile(filepath.Join(filepath.Dir(d), f))
			if err != nil {
				continue
			}
			if err := os.WriteFile(filepath.Join(d, f), parent, 0o644); err != nil {
				return fmt.Errorf("set %s of %s: %w", f, d, err)
			}
		}
	}
	return nil
}

// RemoveCgroupRoot removes the cgroup root's directories, deepest first, and returns how
// many it removed. Its processes must be gone. An empty or "/" root removes nothing.
func RemoveCgroupRoot(root string) (int, error) {
	tops, err := CgroupDirs(cgroupMount, root)
	if err != nil {
		return 0, err
	}
	var all []string
	for _, top := range tops {
		filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				all = append(all, p)
			}
			return nil
		})
	}
	sort.Slice(all, func(i, j int) bool { return len(all[i]) > len(all[j]) })
	n := 0
	var errs []error
	for _, d := range all {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
