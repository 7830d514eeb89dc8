package oci

import (
	"archive/tar"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// Epoch is the time stamp of every entry, config and history of the images made here
// (the Unix epoch), so that the same content always gives the same digest.
var Epoch = time.Unix(0, 0).UTC()

// File is one entry of an image built from files: a regular file (Data), a
// directory (Mode has os.ModeDir) or a symbolic link (Link set).
type File struct {
	Path     string
	Mode     os.FileMode // permission bits plus os.ModeDir/ModeSymlink/ModeSetuid/...
	UID, GID int
	Data     []byte
	Link     string // symlink target
	// Xattrs are extended attributes (e.g. security.capability), written as
	// PAX SCHILY.xattr.* records.
	Xattrs map[string]string `json:",omitempty"`
}

// ImageConfig is the runtime configuration of an image.
type ImageConfig struct {
	Entrypoint []string
	Cmd        []string
	Env        []string
	User       string
	WorkingDir string
	Labels     map[string]string
}

// ImageFromFiles builds a single-layer linux/amd64 image from files. Missing
// parent directories are added (root-owned, 0755). The result is
// deterministic: entries sorted by path, every time stamp the Unix epoch.
func ImageFromFiles(files []File, cfg ImageConfig) (v1.Image, error) {
	entries, err := NormalizeFiles(files)
	if err != nil {
		return nil, err
	}
	layer, err := memLayer(func(tw *tar.Writer) error {
		for _, f := range entries {
			if err := writeFileEntry(tw, f); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pack files: %w", err)
	}
	return imageFromLayers([]v1.Layer{layer}, cfg, "osd images: files")
}

// NormalizeFiles cleans paths, rejects duplicates and escapes, adds missing
// parent directories and sorts by path.
func NormalizeFiles(files []File) ([]File, error) {
	byPath := map[string]File{}
	for _, f := range files {
		p := strings.TrimPrefix(path.Clean("/"+f.Path), "/")
		if p == "" || p == "." {
			return nil, fmt.Errorf("file %q: empty path", f.Path)
		}
		if _, dup := byPath[p]; dup {
			return nil, fmt.Errorf("file %q: listed twice", f.Path)
		}
		if f.Link != "" {
			f.Mode = os.ModeSymlink | 0o777
		}
		f.Path = p
		byPath[p] = f
	}
	for p := range byPath {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			parent, ok := byPath[d]
			if !ok {
				byPath[d] = File{Path: d, Mode: os.ModeDir | 0o755}
				continue
			}
			if !parent.Mode.IsDir() {
				return nil, fmt.Errorf("file %q: parent %q is not a directory", p, d)
			}
		}
	}
	out := make([]File, 0, len(byPath))
	for _, f := range byPath {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func writeFileEntry(tw *tar.Writer, f File) error {
	hdr := &tar.Header{
		Name:    f.Path,
		Mode:    tarMode(f.Mode),
		Uid:     f.UID,
		Gid:     f.GID,
		ModTime: Epoch,
		Format:  tar.FormatPAX,
	}
	for k, v := range f.Xattrs {
		if hdr.PAXRecords == nil {
			hdr.PAXRecords = map[string]string{}
		}
		hdr.PAXRecords["SCHILY.xattr."+k] = v
	}
	switch {
	case f.Mode&os.ModeSymlink != 0:
		hdr.Typeflag = tar.TypeSymlink
		hdr.Linkname = f.Link
	case f.Mode.IsDir():
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
	case f.Mode.IsRegular():
		hdr.Typeflag = tar.TypeReg
		hdr.Size = int64(len(f.Data))
	default:
		return fmt.Errorf("file %q: unsupported mode %v", f.Path, f.Mode)
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("file %q: %w", f.Path, err)
	}
	if hdr.Typeflag == tar.TypeReg {
		if _, err := tw.Write(f.Data); err != nil {
			return fmt.Errorf("file %q: %w", f.Path, err)
		}
	}
	return nil
}

// tarMode converts Go file mode bits to the tar mode field (permissions plus
// setuid/setgid/sticky, given either as os.ModeSetuid... or as the Unix bits
// 0o4000, 0o2000, 0o1000).
func tarMode(m os.FileMode) int64 {
	mode := int64(m.Perm()) | int64(m&0o7000)
	if m&os.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&os.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&os.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

// imageFromLayers stacks layers into a linux/amd64 image with cfg, a fixed
// creation time and one history entry per layer.
func imageFromLayers(layers []v1.Layer, cfg ImageConfig, createdBy string) (v1.Image, error) {
	cf := &v1.ConfigFile{
		Architecture: "amd64",
		OS:           "linux",
		Created:      epoch,
		Config: v1.Config{
			Entrypoint: cfg.Entrypoint,
			Cmd:        cfg.Cmd,
			Env:        cfg.Env,
			User:       cfg.User,
			WorkingDir: cfg.WorkingDir,
			Labels:     cfg.Labels,
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	img, err := mutate.ConfigFile(empty.Image, cf)
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	adds := make([]mutate.Addendum, len(layers))
	for i, l := range layers {
		adds[i] = mutate.Addendum{Layer: l, History: v1.History{Created: epoch, CreatedBy: createdBy}}
	}
	img, err = mutate.Append(img, adds...)
	if err != nil {
		return nil, fmt.Errorf("append layers: %w", err)
	}
	return img, nil
}
