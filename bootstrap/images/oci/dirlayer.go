package oci

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// RootfsExcludes are the paths LayerFromDir leaves out of a root filesystem
// built by mmdebstrap (patterns for path.Match on slash-separated paths
// relative to the root; a matching directory is skipped with its subtree).
// The directories themselves stay so mount points exist.
//
// /dev keeps no entries: the container runtime mounts its own /dev (a tmpfs
// with the standard nodes), so device nodes made by the build would be hidden
// anyway. Device nodes elsewhere are packed faithfully.
var RootfsExcludes = []string{
	"proc/*", "sys/*", "dev/*", "run/*", "tmp/*", "var/tmp/*",
	"var/cache/apt/*", "var/lib/apt/lists/*", "var/cache/debconf/*-old",
	"var/cache/ldconfig/aux-cache", "var/log/apt/*", "var/log/dpkg.log",
	"var/log/alternatives.log", "var/log/bootstrap.log",
	"etc/resolv.conf", "etc/hostname", "etc/machine-id",
	"usr/sbin/policy-rc.d",
}

// DirOptions tunes LayerFromDir.
type DirOptions struct {
	// Exclude lists path.Match patterns (relative, slash-separated) of
	// entries to leave out; a matched directory is skipped with its subtree.
	Exclude []string
	// KeepMtimesBefore: entries modified strictly before this time keep their
	// modification time (files unpacked from .debs carry the package's fixed
	// times, which Python's .pyc checks rely on); every other entry gets the
	// Unix epoch. The zero value sets every entry to the epoch.
	KeepMtimesBefore time.Time
	// LayerFile, if set, is where the compressed layer is streamed (constant
	// memory; the returned layer reads it). Otherwise the layer is in memory.
	LayerFile string
	// Progress, if set, is called about every 1000 entries and at the end
	// with the entries and uncompressed content bytes packed so far.
	Progress func(entries int, bytes int64)
	// Overlay says dir is the upper directory of an overlayfs mount: a 0/0
	// character device there is a whiteout (packed as .wh.NAME) and a
	// directory with the trusted.overlay.opaque attribute hides the lower
	// layers' contents (packed with .wh..wh..opq).
	Overlay bool
}

// LayerFromDir packs the tree at dir into a layer, keeping owners, modes,
// hard links (one inode -> one file, further names are TypeLink), device
// nodes, fifos, symlinks and extended attributes (PAX SCHILY.xattr.*, e.g.
// security.capability). Sockets are skipped. Entries are in lexical walk
// order and time stamps follow opts.KeepMtimesBefore, so the same tree gives
// the same digest.
func LayerFromDir(dir string, opts DirOptions) (v1.Layer, error) {
	p := &dirPacker{root: dir, opts: opts, links: map[fileID]string{}}
	produce := func(tw *tar.Writer) error { return p.pack(tw) }
	var (
		l   *BlobLayer
		err error
	)
	if opts.LayerFile != "" {
		l, err = fileLayer(opts.LayerFile, produce)
	} else {
		l, err = memLayer(produce)
	}
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", dir, err)
	}
	return l, nil
}

type fileID struct{ dev, ino uint64 }

type dirPacker struct {
	root    string
	opts    DirOptions
	links   map[fileID]string
	entries int
	bytes   int64
	// include, if set, decides whether an entry goes into the layer (a
	// skipped directory's children are still visited).
	include func(rel string) (bool, error)
}

func (p *dirPacker) excluded(rel string) bool {
	for _, pat := range p.opts.Exclude {
		if ok, _ := path.Match(pat, rel); ok {
			return true
		}
	}
	return false
}

func (p *dirPacker) pack(tw *tar.Writer) error {
	err := filepath.WalkDir(p.root, func(full string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(p.root, full)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if p.excluded(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if p.include != nil {
			ok, err := p.include(rel)
			if err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
			if !ok {
				return nil
			}
		}
		if err := p.entry(tw, full, rel); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		p.entries++
		if p.opts.Progress != nil && p.entries%1000 == 0 {
			p.opts.Progress(p.entries, p.bytes)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if p.opts.Progress != nil {
		p.opts.Progress(p.entries, p.bytes)
	}
	return nil
}

func (p *dirPacker) entry(tw *tar.Writer, full, rel string) error {
	var st unix.Stat_t
	if err := unix.Lstat(full, &st); err != nil {
		return err
	}
	hdr := &tar.Header{
		Name:    rel,
		Mode:    int64(st.Mode & 0o7777),
		Uid:     int(st.Uid),
		Gid:     int(st.Gid),
		ModTime: Epoch,
		Format:  tar.FormatPAX,
	}
	if mt := time.Unix(st.Mtim.Sec, st.Mtim.Nsec); mt.Before(p.opts.KeepMtimesBefore) {
		hdr.ModTime = time.Unix(st.Mtim.Sec, 0).UTC()
	}
	id := fileID{dev: st.Dev, ino: st.Ino}
	if p.opts.Overlay && st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0 {
		return writeFileEntry(tw, File{Path: path.Join(path.Dir(rel), whiteoutPrefix+path.Base(rel)), Mode: 0o644})
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
	case unix.S_IFREG:
		if first, ok := p.links[id]; ok && st.Nlink > 1 {
			hdr.Typeflag = tar.TypeLink
			hdr.Linkname = first
			return tw.WriteHeader(hdr)
		}
		if st.Nlink > 1 {
			p.links[id] = rel
		}
		hdr.Typeflag = tar.TypeReg
		hdr.Size = st.Size
	case unix.S_IFLNK:
		target, err := os.Readlink(full)
		if err != nil {
			return err
		}
		hdr.Typeflag = tar.TypeSymlink
		hdr.Linkname = target
	case unix.S_IFCHR, unix.S_IFBLK:
		hdr.Typeflag = tar.TypeChar
		if st.Mode&unix.S_IFMT == unix.S_IFBLK {
			hdr.Typeflag = tar.TypeBlock
		}
		hdr.Devmajor = int64(unix.Major(st.Rdev))
		hdr.Devminor = int64(unix.Minor(st.Rdev))
	case unix.S_IFIFO:
		hdr.Typeflag = tar.TypeFifo
	default: // sockets cannot be archived and are recreated by their daemons
		return nil
	}
	xattrs, err := readXattrs(full)
	if err != nil {
		return err
	}
	if len(xattrs) > 0 {
		hdr.PAXRecords = map[string]string{}
		for k, v := range xattrs {
			hdr.PAXRecords["SCHILY.xattr."+k] = v
		}
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if p.opts.Overlay && hdr.Typeflag == tar.TypeDir {
		if v := make([]byte, 1); lgetxattrOK(full, overlayOpaque, v) && v[0] == 'y' {
			return writeFileEntry(tw, File{Path: path.Join(rel, opaqueWhiteout), Mode: 0o644})
		}
	}
	if hdr.Typeflag != tar.TypeReg || hdr.Size == 0 {
		return nil
	}
	f, err := os.Open(full)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(tw, f)
	p.bytes += n
	if err != nil {
		return fmt.Errorf("copy content: %w", err)
	}
	return nil
}

// lgetxattrOK reads a one-byte attribute into v; false when it is absent.
func lgetxattrOK(path, name string, v []byte) bool {
	n, err := unix.Lgetxattr(path, name, v)
	return err == nil && n == len(v)
}

// readXattrs returns the extended attributes of path (not following links).
func readXattrs(path string) (map[string]string, error) {
	size, err := unix.Llistxattr(path, nil)
	if errors.Is(err, unix.ENOTSUP) || size == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list xattrs: %w", err)
	}
	buf := make([]byte, size)
	size, err = unix.Llistxattr(path, buf)
	if err != nil {
		return nil, fmt.Errorf("list xattrs: %w", err)
	}
	out := map[string]string{}
	for _, name := range strings.Split(strings.TrimRight(string(buf[:size]), "\x00"), "\x00") {
		if name == "" || strings.HasPrefix(name, overlayXattrPrefix) {
			continue // overlayfs' own bookkeeping, never image content
		}
		vsize, err := unix.Lgetxattr(path, name, nil)
		if err != nil {
			return nil, fmt.Errorf("get xattr %s: %w", name, err)
		}
		val := make([]byte, vsize)
		if vsize > 0 {
			if vsize, err = unix.Lgetxattr(path, name, val); err != nil {
				return nil, fmt.Errorf("get xattr %s: %w", name, err)
			}
		}
		out[name] = string(val[:vsize])
	}
	return out, nil
}

// Whiteout prefixes of the OCI image layer format (AUFS style), and how
// overlayfs marks the same in an upper directory.
const (
	whiteoutPrefix     = ".wh."
	opaqueWhiteout     = ".wh..wh..opq"
	overlayXattrPrefix = "trusted.overlay."
	overlayOpaque      = "trusted.overlay.opaque"
)

// WhiteoutLayer returns a layer that, stacked on a lower layer, deletes the
// given paths (each becomes a "dir/.wh.name" entry) and makes the given
// directories opaque (a "dir/.wh..wh..opq" entry hides everything the lower
// layers had in dir). Parent directories are included (root-owned, 0755).
func WhiteoutLayer(deleted, opaque []string) (v1.Layer, error) {
	var files []File
	for _, d := range deleted {
		c := strings.TrimPrefix(path.Clean("/"+d), "/")
		if c == "" {
			return nil, fmt.Errorf("whiteout %q: cannot delete the root", d)
		}
		files = append(files, File{Path: path.Join(path.Dir(c), whiteoutPrefix+path.Base(c)), Mode: 0o644})
	}
	for _, d := range opaque {
		c := strings.TrimPrefix(path.Clean("/"+d), "/")
		files = append(files, File{Path: path.Join(c, opaqueWhiteout), Mode: 0o644})
	}
	entries, err := NormalizeFiles(files)
	if err != nil {
		return nil, fmt.Errorf("whiteout layer: %w", err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Path < entries[j].Path })
	return memLayer(func(tw *tar.Writer) error {
		for _, f := range entries {
			if err := writeFileEntry(tw, f); err != nil {
				return err
			}
		}
		return nil
	})
}

// ImageFromLayers stacks layers (lowest first) into an image with cfg.
func ImageFromLayers(layers []v1.Layer, cfg ImageConfig) (v1.Image, error) {
	return imageFromLayers(layers, cfg, "osd images")
}
