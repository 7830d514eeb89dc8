package oci

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// Whiteouts says what ExtractLayer does with a layer's whiteout entries.
type Whiteouts int

const (
	// ApplyWhiteouts deletes what a whiteout names (flattening layers into one
	// tree, in order: UnpackImage).
	ApplyWhiteouts Whiteouts = iota
	// OverlayWhiteouts records whiteouts the way overlayfs does (a 0/0 character
	// device, trusted.overlay.opaque=y on an opaque directory), so the tree can
	// serve as a lower directory of an overlay mount.
	OverlayWhiteouts
)

// UnpackImage extracts img's layers, lowest first, into dir (which should be empty),
// applying each layer's whiteouts to what the layers below it made: the root
// filesystem a container of img would see. Owners, modes, links, devices and extended
// attributes are kept; it needs root for the owners and device nodes.
func UnpackImage(img v1.Image, dir string) error {
	layers, err := img.Layers()
	if err != nil {
		return fmt.Errorf("unpack image: %w", err)
	}
	for i, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return fmt.Errorf("unpack image layer %d: %w", i, err)
		}
		err = ExtractLayer(rc, dir, ApplyWhiteouts)
		rc.Close()
		if err != nil {
			return fmt.Errorf("unpack image layer %d: %w", i, err)
		}
	}
	return nil
}

// ExtractLayer writes the uncompressed layer tar r into dir, over what dir holds.
func ExtractLayer(r io.Reader, dir string, wh Whiteouts) error {
	x := &extractor{dir: dir, wh: wh, made: map[string]bool{}}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read layer: %w", err)
		}
		if err := x.entry(h, tr); err != nil {
			return fmt.Errorf("extract %s: %w", h.Name, err)
		}
	}
	return x.finish()
}

type extractor struct {
	dir  string
	wh   Whiteouts
	made map[string]bool // paths this layer wrote (an opaque whiteout keeps them)
	dirs []dirTime       // directory times, set last (entries inside change them)
}

type dirTime struct {
	path string
	t    time.Time
}

// target is where rel goes under the extraction root; it refuses paths that leave it.
func (x *extractor) target(name string) (rel, full string, err error) {
	rel = strings.TrimPrefix(path.Clean("/"+name), "/")
	if rel == "" || rel == "." {
		return "", x.dir, nil
	}
	if strings.HasPrefix(rel, "../") {
		return "", "", fmt.Errorf("path leaves the root")
	}
	return rel, filepath.Join(x.dir, filepath.FromSlash(rel)), nil
}

func (x *extractor) entry(h *tar.Header, r io.Reader) error {
	rel, full, err := x.target(h.Name)
	if err != nil || rel == "" {
		return err
	}
	base := path.Base(rel)
	if base == opaqueWhiteout {
		return x.opaque(filepath.Dir(full), path.Dir(rel))
	}
	if name, ok := strings.CutPrefix(base, whiteoutPrefix); ok {
		return x.whiteout(filepath.Join(filepath.Dir(full), name))
	}
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return err
	}
	x.made[rel] = true
	if h.Typeflag != tar.TypeDir {
		if err := os.RemoveAll(full); err != nil {
			return err
		}
	} else if st, err := os.Lstat(full); err == nil && !st.IsDir() {
		if err := os.Remove(full); err != nil {
			return err
		}
	}
	mode := uint32(h.Mode & 0o7777)
	switch h.Typeflag {
	case tar.TypeDir:
		if err := os.Mkdir(full, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		x.dirs = append(x.dirs, dirTime{full, h.ModTime})
	case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // old archives
		if err := writeRegular(full, r); err != nil {
			return err
		}
	case tar.TypeSymlink:
		return x.finishEntry(full, h, os.Symlink(h.Linkname, full), 0, true)
	case tar.TypeLink:
		_, src, err := x.target(h.Linkname)
		if err != nil {
			return err
		}
		return os.Link(src, full) // a hard link shares its target's owner, mode and times
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		kind := map[byte]uint32{tar.TypeChar: unix.S_IFCHR, tar.TypeBlock: unix.S_IFBLK, tar.TypeFifo: unix.S_IFIFO}[h.Typeflag]
		dev := int(unix.Mkdev(uint32(h.Devmajor), uint32(h.Devminor)))
		if err := unix.Mknod(full, kind|0o600, dev); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unsupported entry type %q", h.Typeflag)
	}
	return x.finishEntry(full, h, nil, mode, false)
}

// finishEntry sets owner, extended attributes, mode (after chown, which clears
// setuid bits) and, but for directories, times.
func (x *extractor) finishEntry(full string, h *tar.Header, made error, mode uint32, link bool) error {
	if made != nil {
		return made
	}
	if err := os.Lchown(full, h.Uid, h.Gid); err != nil {
		return err
	}
	for k, v := range h.PAXRecords {
		if name, ok := strings.CutPrefix(k, "SCHILY.xattr."); ok {
			if err := unix.Lsetxattr(full, name, []byte(v), 0); err != nil {
				return fmt.Errorf("set xattr %s: %w", name, err)
			}
		}
	}
	if !link {
		if err := unix.Chmod(full, mode); err != nil {
			return err
		}
	}
	if h.Typeflag == tar.TypeDir {
		return nil
	}
	ts := []unix.Timespec{unix.NsecToTimespec(h.ModTime.UnixNano()), unix.NsecToTimespec(h.ModTime.UnixNano())}
	return unix.UtimesNanoAt(unix.AT_FDCWD, full, ts, unix.AT_SYMLINK_NOFOLLOW)
}

func writeRegular(full string, r io.Reader) error {
	f, err := os.OpenFile(full, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// whiteout removes what lower layers had at full, or marks it for overlayfs.
func (x *extractor) whiteout(full string) error {
	if err := os.RemoveAll(full); err != nil {
		return err
	}
	if x.wh == ApplyWhiteouts {
		return nil
	}
	return unix.Mknod(full, unix.S_IFCHR|0o600, 0)
}

// opaque hides what lower layers had in the directory dir (relative rel): every entry
// this layer did not write is removed, or the directory is marked for overlayfs.
func (x *extractor) opaque(dir, rel string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if x.wh == OverlayWhiteouts {
		return unix.Lsetxattr(dir, overlayOpaque, []byte("y"), 0)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !x.made[path.Join(rel, e.Name())] {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// finish sets the directories' times, deepest first.
func (x *extractor) finish() error {
	sort.SliceStable(x.dirs, func(i, j int) bool { return len(x.dirs[i].path) > len(x.dirs[j].path) })
	for _, d := range x.dirs {
		ts := []unix.Timespec{unix.NsecToTimespec(d.t.UnixNano()), unix.NsecToTimespec(d.t.UnixNano())}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, d.path, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	return nil
}
