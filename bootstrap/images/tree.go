package images

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/osdcloud/osd/bootstrap/images/oci"
)

// The images others are layered on keep the tree of their own layer under
// StateDir/layers/NAME/tree (in overlayfs' upper-directory form: a whiteout is a 0/0
// character device), next to the digest of the layer it holds, so a build on top of
// them mounts it as a lower directory instead of unpacking anything. A missing or
// stale tree is extracted again from the stored image.

func (b *Builder) treeDir(name string) string { return filepath.Join(b.releaseDir(), "layers", name) }

// ensureTree returns the kept tree of the top layer of the stored image name.
func (b *Builder) ensureTree(name string) (string, error) {
	b.treeMu.Lock()
	defer b.treeMu.Unlock()
	store, err := b.Store()
	if err != nil {
		return "", err
	}
	img, _, err := store.Get(name)
	if err != nil {
		return "", err
	}
	layers, err := img.Layers()
	if err != nil || len(layers) == 0 {
		return "", fmt.Errorf("image %s has no layers: %v", name, err)
	}
	top := layers[len(layers)-1]
	d, err := top.Digest()
	if err != nil {
		return "", err
	}
	dir := b.treeDir(name)
	tree := filepath.Join(dir, "tree")
	if have, err := os.ReadFile(filepath.Join(dir, "digest")); err == nil && string(have) == d.String() {
		if _, err := os.Stat(tree); err == nil {
			return tree, nil
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	fresh := filepath.Join(dir, "tree.new")
	if err := removeTree(fresh); err != nil {
		return "", err
	}
	if err := os.Mkdir(fresh, 0o755); err != nil {
		return "", err
	}
	rc, err := top.Uncompressed()
	if err != nil {
		return "", err
	}
	err = oci.ExtractLayer(rc, fresh, oci.OverlayWhiteouts)
	rc.Close()
	if err != nil {
		return "", fmt.Errorf("unpack the layer of %s: %w", name, err)
	}
	return tree, b.swapTree(name, fresh, d)
}

// keepTree keeps dir (a built layer's tree, moved) as the tree of image name. Its
// time stamps are first made the layer's (packed with KeepMtimesBefore before): what a
// build on top copies up from the tree without changing it (a directory it adds to, a
// file it opens for writing) then carries the same time stamp as when the tree is
// extracted from the stored layer, so layers built on it are reproducible.
func (b *Builder) keepTree(name, dir string, layer v1.Layer, before time.Time) error {
	d, err := layer.Digest()
	if err != nil {
		return err
	}
	if err := layerTimes(dir, before); err != nil {
		return fmt.Errorf("keep the tree of %s: %w", name, err)
	}
	b.treeMu.Lock()
	defer b.treeMu.Unlock()
	if err := os.MkdirAll(b.treeDir(name), 0o755); err != nil {
		return err
	}
	fresh := filepath.Join(b.treeDir(name), "tree.new")
	if err := removeTree(fresh); err != nil {
		return err
	}
	if err := os.Rename(dir, fresh); err != nil {
		return fmt.Errorf("keep the tree of %s: %w", name, err)
	}
	return b.swapTree(name, fresh, d)
}

// layerTimes sets the modification time of every entry under dir (not dir itself, not
// following symbolic links) to what oci.LayerFromDir packs for it with KeepMtimesBefore
// before: whole seconds when older than before, else the epoch.
func layerTimes(dir string, before time.Time) error {
	return filepath.WalkDir(dir, func(full string, _ fs.DirEntry, err error) error {
		if err != nil || full == dir {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(full, &st); err != nil {
			return err
		}
		mt := oci.Epoch
		if t := time.Unix(st.Mtim.Sec, st.Mtim.Nsec); t.Before(before) {
			mt = time.Unix(st.Mtim.Sec, 0)
		}
		ts := []unix.Timespec{unix.NsecToTimespec(mt.UnixNano()), unix.NsecToTimespec(mt.UnixNano())}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, full, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("set the time of %s: %w", full, err)
		}
		return nil
	})
}

// swapTree makes fresh the tree of name, holding layer digest d.
func (b *Builder) swapTree(name, fresh string, d v1.Hash) error {
	dir := b.treeDir(name)
	tree := filepath.Join(dir, "tree")
	_ = os.Remove(filepath.Join(dir, "digest"))
	if err := removeTree(tree); err != nil {
		return err
	}
	if err := os.Rename(fresh, tree); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "digest"), []byte(d.String()), 0o644)
}

// pruneTree removes from dir every entry a pattern excludes from the image (what a
// build leaves behind: package lists, logs, caches, policy-rc.d), so the tree is
// exactly the layer. Nothing may be mounted under dir.
func pruneTree(dir string, patterns []string) error {
	if mps, err := mountsUnder(dir); err != nil || len(mps) > 0 {
		return fmt.Errorf("prune %s: mounts left: %v %v", dir, mps, err)
	}
	return filepath.WalkDir(dir, func(full string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel, err := filepath.Rel(dir, full)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !excludedPath(patterns, rel) {
			return nil
		}
		if err := os.RemoveAll(full); err != nil {
			return fmt.Errorf("prune %s: %w", rel, err)
		}
		if d.IsDir() {
			return filepath.SkipDir
		}
		return nil
	})
}

// treeNames lists the images whose trees are kept (for tests and cleanup).
func (b *Builder) treeNames() []string {
	ents, _ := os.ReadDir(filepath.Join(b.releaseDir(), "layers"))
	var out []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out
}
