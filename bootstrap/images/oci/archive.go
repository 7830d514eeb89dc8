package oci

import (
	"fmt"
	"io"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/osdcloud/osd/bootstrap/fsutil"
)

// WriteArchive writes refs (reference -> image) to w as a docker-save
// tarball, the format containerd's importer (k3s agent/images, `ctr images
// import`) accepts. References are tags; a
// missing tag means latest.
func WriteArchive(w io.Writer, refs map[string]v1.Image) error {
	if len(refs) == 0 {
		return fmt.Errorf("write image archive: no images")
	}
	m := make(map[name.Reference]v1.Image, len(refs))
	for r, img := range refs {
		tag, err := name.NewTag(r)
		if err != nil {
			return fmt.Errorf("write image archive: reference %q: %w", r, err)
		}
		m[tag] = img
	}
	if err := tarball.MultiRefWrite(m, w); err != nil {
		return fmt.Errorf("write image archive: %w", err)
	}
	return nil
}

// WriteArchiveFile writes the archive to path atomically (fsutil.WriteAtomic:
// a synced temporary file renamed into place, the directory synced; mode 0644), so a reader such as
// k3s at start never sees a partial archive.
func WriteArchiveFile(path string, refs map[string]v1.Image) error {
	return writeFileAtomic(path, func(w io.Writer) error { return WriteArchive(w, refs) })
}

// WriteOCIArchiveFile is WriteOCIArchive to path, atomically (mode 0644).
func WriteOCIArchiveFile(path string, refs map[string]v1.Image) error {
	return writeFileAtomic(path, func(w io.Writer) error { return WriteOCIArchive(w, refs) })
}

// writeFileAtomic writes path through write with fsutil.WriteAtomic (mode 0644).
func writeFileAtomic(path string, write func(io.Writer) error) error {
	if err := fsutil.WriteAtomic(path, 0o644, write); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// FullRef returns the fully qualified form containerd uses, following the
// Docker rules: the first path component is a registry if it contains "."
// or ":" or is "localhost"; otherwise the registry is docker.io (and a
// single-component name gets library/); a missing tag is latest.
func FullRef(r string) (string, error) {
	tag, err := name.NewTag(r) // syntax check
	if err != nil {
		return "", fmt.Errorf("reference %q: %w", r, err)
	}
	repo := r
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	domain, rest, found := strings.Cut(repo, "/")
	if !found || (!strings.ContainsAny(domain, ".:") && domain != "localhost") {
		domain, rest = "docker.io", repo
		if !strings.Contains(rest, "/") {
			rest = "library/" + rest
		}
	}
	if domain == "index.docker.io" {
		domain = "docker.io"
	}
	return domain + "/" + rest + ":" + tag.TagStr(), nil
}
