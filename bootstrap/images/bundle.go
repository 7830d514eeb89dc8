package images

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// An airgap bundle is one tar file: bundle.json first (format version, the
// images with name, reference, digest and recipe hash, and every blob's
// digest and size), then an OCI image layout (oci-layout, blobs/sha256/...,
// index.json), so `ctr images import` can read a bundle too.

const (
	bundleManifestName = "bundle.json"
	bundleVersion      = 1
)

// BundleManifest is the bundle's table of contents.
type BundleManifest struct {
	Version int          `json:"version"`
	Images  []Stored     `json:"images"`
	Blobs   []BundleBlob `json:"blobs"`
}

// BundleBlob is one blob of a bundle.
type BundleBlob struct {
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// ExportBundle writes the named images of store (all when names is empty)
// to w as an airgap bundle.
func ExportBundle(w io.Writer, store *Store, names ...string) ([]Stored, error) {
	all, err := store.List()
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var sel []Stored
	var imgs []archiveImage
	for _, st := range all {
		if len(names) > 0 && !want[st.Name] {
			continue
		}
		delete(want, st.Name)
		img, _, err := store.Get(st.Name)
		if err != nil {
			return nil, err
		}
		full, err := fullRef(st.Ref)
		if err != nil {
			return nil, err
		}
		sel = append(sel, st)
		imgs = append(imgs, archiveImage{img: img, annotations: map[string]string{
			annotationContainerdName: full,
			annotationRefName:        st.Ref,
			annotationImage:          st.Name,
			annotationRecipe:         st.RecipeHash,
			annotationCacheKey:       st.CacheKey,
		}})
	}
	for n := range want {
		return nil, fmt.Errorf("export bundle: image %s is not built", n)
	}
	if len(sel) == 0 {
		return nil, fmt.Errorf("export bundle: no images")
	}
	err = writeOCIArchive(w, imgs, func(tw *tar.Writer, blobs []blobRef) error {
		m := BundleManifest{Version: bundleVersion, Images: sel}
		for _, b := range blobs {
			m.Blobs = append(m.Blobs, BundleBlob{Digest: b.digest.String(), Size: b.size})
		}
		data, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			return err
		}
		return writeTarBytes(tw, bundleManifestName, data)
	})
	if err != nil {
		return nil, fmt.Errorf("export bundle: %w", err)
	}
	return sel, nil
}

// ExportBundleFile writes the bundle to path atomically.
func ExportBundleFile(path string, store *Store, names ...string) ([]Stored, error) {
	var sel []Stored
	err := writeFileAtomic(path, func(w io.Writer) error {
		var err error
		sel, err = ExportBundle(w, store, names...)
		return err
	})
	return sel, err
}

// ErrBadBundle marks a bundle that is truncated, corrupt or not a bundle.
var ErrBadBundle = errors.New("bad bundle")

// ImportBundle verifies the bundle at path and adds its images to store.
// Every blob is staged next to the store and checked against the digest
// and size the bundle lists, and every image against its blobs, before
// anything is committed; a truncated or corrupt bundle imports nothing.
func ImportBundle(path string, store *Store) ([]Stored, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("import bundle: %w", err)
	}
	defer f.Close()
	stage, err := os.MkdirTemp(store.Dir(), ".import-")
	if err != nil {
		return nil, fmt.Errorf("import bundle: %w", err)
	}
	defer os.RemoveAll(stage)
	bad := func(format string, a ...any) error {
		return fmt.Errorf("bundle %s is truncated or corrupt: %s; nothing was imported: %w", path, fmt.Sprintf(format, a...), ErrBadBundle)
	}
	m, staged, err := stageBundle(f, stage, bad)
	if err != nil {
		return nil, err
	}
	// Every image must be complete and match its listed digest.
	sl := layout.Path(stage)
	for _, st := range m.Images {
		h, err := v1.NewHash(st.Digest)
		if err != nil {
			return nil, bad("image %s: digest %q: %v", st.Name, st.Digest, err)
		}
		if st.Name == "" || st.Ref == "" {
			return nil, bad("image %s has no name or reference", st.Digest)
		}
		if _, err := fullRef(st.Ref); err != nil {
			return nil, bad("image %s: %v", st.Name, err)
		}
		if err := checkStagedImage(sl, h, staged); err != nil {
			return nil, bad("image %s: %v", st.Name, err)
		}
	}
	return store.commitImport(stage, m.Images)
}

// stageBundle reads the bundle, writing verified blobs into stage/blobs.
func stageBundle(r io.Reader, stage string, bad func(string, ...any) error) (*BundleManifest, map[string]bool, error) {
	tr := tar.NewReader(r)
	h, err := tr.Next()
	if err != nil {
		return nil, nil, bad("reading the table of contents: %v", err)
	}
	if h.Name != bundleManifestName {
		return nil, nil, bad("first entry is %q, want %s", h.Name, bundleManifestName)
	}
	var m BundleManifest
	if err := json.NewDecoder(io.LimitReader(tr, 16<<20)).Decode(&m); err != nil {
		return nil, nil, bad("%s: %v", bundleManifestName, err)
	}
	if m.Version != bundleVersion {
		return nil, nil, bad("format version %d, want %d", m.Version, bundleVersion)
	}
	if len(m.Images) == 0 {
		return nil, nil, bad("no images listed")
	}
	want := map[string]int64{}
	for _, b := range m.Blobs {
		want[b.Digest] = b.Size
	}
	staged := map[string]bool{}
	if err := os.MkdirAll(filepath.Join(stage, "blobs", "sha256"), 0o755); err != nil {
		return nil, nil, err
	}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, bad("reading after %d of %d blobs: %v", len(staged), len(want), err)
		}
		hex, ok := strings.CutPrefix(h.Name, "blobs/sha256/")
		if !ok {
			continue // oci-layout, index.json: rebuilt from the table of contents
		}
		digest := "sha256:" + hex
		size, listed := want[digest]
		if !listed {
			return nil, nil, bad("blob %s is not in the table of contents", digest)
		}
		if staged[digest] {
			return nil, nil, bad("blob %s appears twice", digest)
		}
		if err := stageBlob(tr, filepath.Join(stage, "blobs", "sha256", hex), digest, size, bad); err != nil {
			return nil, nil, err
		}
		staged[digest] = true
	}
	for _, b := range m.Blobs {
		if !staged[b.Digest] {
			return nil, nil, bad("blob %s (%d bytes) is missing", b.Digest, b.Size)
		}
	}
	return &m, staged, nil
}

func stageBlob(r io.Reader, path, digest string, size int64, bad func(string, ...any) error) error {
	out, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), r)
	if err != nil {
		return bad("blob %s: read %d of %d bytes: %v", digest, n, size, err)
	}
	got := "sha256:" + hex.EncodeToString(h.Sum(nil))
	if got != digest || n != size {
		return bad("blob %s has %s (%d bytes), want %s (%d bytes)", digest, got, n, digest, size)
	}
	return out.Close()
}

// checkStagedImage checks that an image's manifest, config and layers were
// all staged (their digests were verified while staging).
func checkStagedImage(sl layout.Path, h v1.Hash, staged map[string]bool) error {
	if !staged[h.String()] {
		return fmt.Errorf("manifest %s is missing", h)
	}
	raw, err := sl.Bytes(h)
	if err != nil {
		return err
	}
	var m v1.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("manifest %s: %w", h, err)
	}
	if len(m.Layers) == 0 {
		return fmt.Errorf("manifest %s has no layers", h)
	}
	for _, d := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		if !staged[d.Digest.String()] {
			return fmt.Errorf("blob %s of manifest %s is missing", d.Digest, h)
		}
	}
	return nil
}

// commitImport moves staged blobs into the store and then adds the images
// to its index (the index write is the commit point: blobs alone are never
// visible as images).
func (s *Store) commitImport(stage string, sts []Stored) ([]Stored, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	src := filepath.Join(stage, "blobs", "sha256")
	dst := filepath.Join(s.layoutDir(), "blobs", "sha256")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return nil, fmt.Errorf("import bundle: %w", err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return nil, fmt.Errorf("import bundle: %w", err)
	}
	for _, e := range ents {
		to := filepath.Join(dst, e.Name())
		if _, err := os.Stat(to); err == nil {
			continue
		}
		if err := os.Rename(filepath.Join(src, e.Name()), to); err != nil {
			return nil, fmt.Errorf("import bundle: %w", err)
		}
	}
	ii, err := s.path().ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("import bundle: %w", err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("import bundle: %w", err)
	}
	byName := map[string]int{}
	for i, d := range im.Manifests {
		byName[d.Annotations[annotationImage]] = i
	}
	out := make([]Stored, len(sts))
	for i, st := range sts {
		raw, err := s.path().Bytes(mustHash(st.Digest))
		if err != nil {
			return nil, fmt.Errorf("import bundle: %w", err)
		}
		var m v1.Manifest
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("import bundle: manifest %s: %w", st.Digest, err)
		}
		desc := v1.Descriptor{MediaType: m.MediaType, Digest: mustHash(st.Digest), Size: int64(len(raw)), Annotations: map[string]string{
			annotationRefName: st.Ref, annotationImage: st.Name, annotationRecipe: st.RecipeHash, annotationCacheKey: st.CacheKey}}
		if j, ok := byName[st.Name]; ok {
			im.Manifests[j] = desc
		} else {
			byName[st.Name] = len(im.Manifests)
			im.Manifests = append(im.Manifests, desc)
		}
		st.Size = int64(len(raw)) + m.Config.Size
		for _, l := range m.Layers {
			st.Size += l.Size
		}
		out[i] = st
	}
	data, err := json.MarshalIndent(im, "", "   ")
	if err != nil {
		return nil, fmt.Errorf("import bundle: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(s.layoutDir(), "index.json"), func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}); err != nil {
		return nil, fmt.Errorf("import bundle: %w", err)
	}
	if err := s.gc(); err != nil {
		return nil, err
	}
	return out, nil
}

func mustHash(s string) v1.Hash {
	h, err := v1.NewHash(s)
	if err != nil {
		panic(err) // digests were validated while staging
	}
	return h
}
