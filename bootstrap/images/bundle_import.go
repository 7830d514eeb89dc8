package images

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/osdcloud/osd/bootstrap/fsutil"
)

// ErrBadBundle marks a bundle that is truncated, corrupt, crafted or not a bundle.
var ErrBadBundle = errors.New("bad bundle")

// bundleFault is what is wrong with a bundle (as opposed to an error of this host, such
// as a full disk).
type bundleFault struct{ msg string }

func (f *bundleFault) Error() string { return f.msg }

func faultf(format string, a ...any) error { return &bundleFault{msg: fmt.Sprintf(format, a...)} }

// ImportBundle verifies the bundle at path and adds its images to store.
//
// Every name and digest is checked against what ExportBundle writes before it is used
// (bundle_check.go); blobs are streamed into one staging directory opened once as an
// os.Root, hashed on the way, and every image is checked against its blobs before
// anything is committed. A bundle that fails any check imports nothing and leaves no
// staged file behind.
func ImportBundle(path string, store *Store) ([]Stored, error) {
	f, err := openBundle(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, done, err := decompressed(f)
	if err != nil {
		return nil, fmt.Errorf("bundle %s is corrupt: %v; nothing was imported (make a new one with osd images export): %w", path, err, ErrBadBundle)
	}
	defer done()
	return importBundle(r, path, store)
}

// openBundle opens path for reading if it is a regular file (a fifo or device would
// block or never end). O_NONBLOCK keeps the open itself from waiting on a fifo.
func openBundle(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("import bundle: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("import bundle: %w", err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("import bundle: %s is not a regular file (mode %s): give the file osd images export wrote: %w", path, fi.Mode().Type(), ErrBadBundle)
	}
	return f, nil
}

// importBundle reads a bundle from r (called name in messages) into store.
func importBundle(r io.Reader, name string, store *Store) ([]Stored, error) {
	stg, err := newStage(store.Dir())
	if err != nil {
		return nil, fmt.Errorf("import bundle: %w", err)
	}
	defer stg.remove()
	m, sizes, err := readBundle(r, stg)
	if err == nil {
		for _, st := range m.Images {
			if err = checkStagedImage(stg, st, sizes); err != nil {
				break
			}
		}
	}
	if f := (*bundleFault)(nil); errors.As(err, &f) {
		return nil, fmt.Errorf("bundle %s is truncated, corrupt or not an osd bundle: %s; nothing was imported (make a new one with osd images export): %w", name, f.msg, ErrBadBundle)
	}
	if err != nil {
		return nil, fmt.Errorf("import bundle %s: %w; nothing was imported", name, err)
	}
	return store.commitImport(stg, m)
}

// readBundle reads bundle.json (first), checks it, then every other entry against the
// allow-list, staging each listed blob. It returns the manifest and hex digest -> size.
func readBundle(r io.Reader, stg *stage) (*BundleManifest, map[string]int64, error) {
	tr := tar.NewReader(r)
	h, err := tr.Next()
	if err != nil {
		return nil, nil, faultf("reading the first entry: %v", err)
	}
	if h.Name != bundleManifestName {
		return nil, nil, faultf("first entry is %q, want %s", clip(h.Name), bundleManifestName)
	}
	if _, _, err := classifyEntry(h); err != nil {
		return nil, nil, faultf("%v", err)
	}
	if h.Size > maxBundleManifest {
		return nil, nil, faultf("%s is %d bytes, more than %d", bundleManifestName, h.Size, maxBundleManifest)
	}
	data, err := io.ReadAll(tr)
	if err != nil {
		return nil, nil, faultf("%s: %v", bundleManifestName, err)
	}
	var m BundleManifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, nil, faultf("%s: %v", bundleManifestName, err)
	}
	sizes, err := checkManifest(&m)
	if err != nil {
		return nil, nil, faultf("%s: %v", bundleManifestName, err)
	}
	seen := map[string]bool{bundleManifestName: true}
	staged := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, faultf("reading after %d of %d blobs: %v", staged, len(sizes), err)
		}
		kind, hex, err := classifyEntry(h)
		if err != nil {
			return nil, nil, faultf("%v", err)
		}
		if seen[h.Name] {
			return nil, nil, faultf("entry %q appears twice", h.Name)
		}
		seen[h.Name] = true
		if kind != entryBlob {
			if h.Size > maxBundleSmallEntry {
				return nil, nil, faultf("entry %q is %d bytes, more than %d", h.Name, h.Size, maxBundleSmallEntry)
			}
			if _, err := io.Copy(io.Discard, tr); err != nil { // rebuilt from bundle.json
				return nil, nil, faultf("entry %q: %v", h.Name, err)
			}
			continue
		}
		size, listed := sizes[hex]
		if !listed {
			return nil, nil, faultf("blob sha256:%s is not listed in %s", hex, bundleManifestName)
		}
		if h.Size != size {
			return nil, nil, faultf("blob sha256:%s is %d bytes in the archive, %s lists %d", hex, h.Size, bundleManifestName, size)
		}
		if err := stg.writeBlob(tr, hex, size); err != nil {
			return nil, nil, err
		}
		staged++
	}
	for _, n := range []string{bundleLayoutName, bundleIndexName} {
		if !seen[n] {
			return nil, nil, faultf("entry %s is missing", n)
		}
	}
	for _, b := range m.Blobs {
		hex, _ := digestHex(b.Digest)
		if !seen[bundleBlobPrefix+hex] {
			return nil, nil, faultf("blob %s (%d bytes) is missing", b.Digest, b.Size)
		}
	}
	return &m, sizes, nil
}

// checkStagedImage checks an image's manifest (staged and digest-verified) and that its
// config and layers were staged with the sizes it names.
func checkStagedImage(stg *stage, st Stored, sizes map[string]int64) error {
	hex, _ := digestHex(st.Digest)
	if sizes[hex] > maxManifestBlob {
		return faultf("image %s: manifest %s is %d bytes, more than %d", st.Name, st.Digest, sizes[hex], maxManifestBlob)
	}
	raw, err := stg.readBlob(hex, maxManifestBlob)
	if err != nil {
		return err
	}
	var m v1.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return faultf("image %s: manifest %s: %v", st.Name, st.Digest, err)
	}
	if m.SchemaVersion != 2 || len(m.Layers) == 0 {
		return faultf("image %s: manifest %s has schema version %d and %d layers, want version 2 with layers", st.Name, st.Digest, m.SchemaVersion, len(m.Layers))
	}
	for _, d := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		h, err := digestHex(d.Digest.String())
		if err != nil {
			return faultf("image %s: manifest %s: %v", st.Name, st.Digest, err)
		}
		size, ok := sizes[h]
		if !ok {
			return faultf("image %s: blob %s of manifest %s is missing", st.Name, d.Digest, st.Digest)
		}
		if size != d.Size {
			return faultf("image %s: blob %s is %d bytes, its manifest says %d", st.Name, d.Digest, size, d.Size)
		}
	}
	return nil
}

// commitImport moves staged blobs into the store and then adds the images to its index
// (the index write is the commit point: blobs alone are never visible as images). Blobs
// it moved are removed again if the commit fails.
func (s *Store) commitImport(stg *stage, m *BundleManifest) (out []Stored, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dst := filepath.Join(s.layoutDir(), "blobs", "sha256")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return nil, fmt.Errorf("import bundle: %w", err)
	}
	var moved []string
	defer func() {
		if err != nil {
			for _, p := range moved {
				os.Remove(p)
			}
		}
	}()
	for _, b := range m.Blobs {
		hex, _ := digestHex(b.Digest) // checked by checkManifest
		to := filepath.Join(dst, hex)
		_, err := os.Lstat(to)
		held := err == nil
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("import bundle: %w", err)
		}
		// The staged copy was verified as it was read: it replaces a blob already held
		// (which may be damaged) instead of trusting it unverified.
		if err := os.Rename(stg.path(hex), to); err != nil {
			return nil, fmt.Errorf("import bundle: %w", err)
		}
		s.trusted(v1.Hash{Algorithm: "sha256", Hex: hex}, b.Size)
		if !held {
			moved = append(moved, to)
		}
	}
	if err := fsutil.SyncDir(dst); err != nil {
		return nil, fmt.Errorf("import bundle: %w", err)
	}
	out, err = s.indexImported(m.Images)
	if err != nil {
		return nil, fmt.Errorf("import bundle: %w", err)
	}
	moved = nil // the index refers to them now
	if err := s.gc(); err != nil {
		return nil, err
	}
	return out, nil
}

// indexImported adds (or replaces, by name) the imported images in the store's index.
func (s *Store) indexImported(sts []Stored) ([]Stored, error) {
	out := make([]Stored, len(sts))
	descs := make([]v1.Descriptor, len(sts))
	for i, st := range sts {
		h, err := v1.NewHash(st.Digest)
		if err != nil {
			return nil, err
		}
		raw, err := os.ReadFile(s.blobFile(h))
		if err != nil {
			return nil, err
		}
		var m v1.Manifest
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("manifest %s: %w", st.Digest, err)
		}
		mt := m.MediaType
		if mt == "" {
			mt = types.OCIManifestSchema1
		}
		descs[i] = v1.Descriptor{MediaType: mt, Digest: h, Size: int64(len(raw)), Annotations: map[string]string{
			annotationRefName: st.Ref, annotationImage: st.Name, annotationRecipe: st.RecipeHash, annotationCacheKey: st.CacheKey}}
		st.Size = int64(len(raw)) + m.Config.Size
		for _, l := range m.Layers {
			st.Size += l.Size
		}
		out[i] = st
	}
	return out, s.setEntries(descs...)
}
