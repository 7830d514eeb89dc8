package oci

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// DiffLayer packs what changed from the tree lower to the tree upper, for
// an image layered on a base whose layer was packed from lower: entries new
// or changed in upper (type, mode, owner, size, mtime, link target, device,
// xattrs or content differ), and a whiteout (dir/.wh.name) for every path
// of lower missing in upper (one for a removed directory, not for each of
// its children). Whiteouts come first, sorted; then the entries in walk
// order. opts apply to both trees (Exclude) and to the entries written.
func DiffLayer(lower, upper string, opts DirOptions) (v1.Layer, error) {
	deleted, err := deletedPaths(lower, upper, opts.Exclude)
	if err != nil {
		return nil, fmt.Errorf("diff %s %s: %w", lower, upper, err)
	}
	p := &dirPacker{root: upper, opts: opts, links: map[fileID]string{}}
	p.include = func(rel string) (bool, error) { return changed(filepath.Join(lower, rel), filepath.Join(upper, rel)) }
	produce := func(tw *tar.Writer) error {
		for _, d := range deleted {
			wh := File{Path: path.Join(path.Dir(d), whiteoutPrefix+path.Base(d)), Mode: 0o644}
			if err := writeFileEntry(tw, wh); err != nil {
				return err
			}
		}
		return p.pack(tw)
	}
	var l *BlobLayer
	if opts.LayerFile != "" {
		l, err = fileLayer(opts.LayerFile, produce)
	} else {
		l, err = memLayer(produce)
	}
	if err != nil {
		return nil, fmt.Errorf("diff %s %s: %w", lower, upper, err)
	}
	return l, nil
}

// deletedPaths lists the paths of lower that upper lacks (top-most only).
func deletedPaths(lower, upper string, exclude []string) ([]string, error) {
	var out []string
	ex := &dirPacker{opts: DirOptions{Exclude: exclude}}
	err := filepath.WalkDir(lower, func(full string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(lower, full)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if ex.excluded(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		var st unix.Stat_t
		err = unix.Lstat(filepath.Join(upper, rel), &st)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			out = append(out, rel)
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		return err
	})
	sort.Strings(out)
	return out, err
}

// changed reports whether the entry at upper differs from the one at lower.
func changed(lower, upper string) (bool, error) {
	var a, b unix.Stat_t
	if err := unix.Lstat(lower, &a); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return true, nil
		}
		return false, err
	}
	if err := unix.Lstat(upper, &b); err != nil {
		return false, err
	}
	if a.Mode != b.Mode || a.Uid != b.Uid || a.Gid != b.Gid || a.Rdev != b.Rdev {
		return true, nil
	}
	xa, err := readXattrs(lower)
	if err != nil {
		return false, err
	}
	xb, err := readXattrs(upper)
	if err != nil {
		return false, err
	}
	if !sameMap(xa, xb) {
		return true, nil
	}
	switch a.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return false, nil // children are compared on their own
	case unix.S_IFLNK:
		ta, err := os.Readlink(lower)
		if err != nil {
			return false, err
		}
		tb, err := os.Readlink(upper)
		return ta != tb, err
	case unix.S_IFREG:
		if a.Size != b.Size || a.Mtim != b.Mtim {
			return true, nil
		}
		return contentDiffers(lower, upper)
	}
	return false, nil
}

func contentDiffers(a, b string) (bool, error) {
	fa, err := os.Open(a)
	if err != nil {
		return false, err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return false, err
	}
	defer fb.Close()
	ba, bb := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return true, nil
		}
		if ea == io.EOF || ea == io.ErrUnexpectedEOF {
			return eb != ea, nil
		}
		if ea != nil {
			return false, ea
		}
		if eb != nil {
			return false, eb
		}
	}
}

// sameMap reports whether two string maps are equal.
func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
