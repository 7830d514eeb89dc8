package bundle

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/osdcloud/osd/bootstrap/images"
)

// ErrBad marks a bundle that is truncated, corrupt, crafted or not a bundle.
var ErrBad = errors.New("bad bundle")

// bundleFault is what is wrong with a bundle (as opposed to an error of this host, such
// as a full disk).
type bundleFault struct{ msg string }

func (f *bundleFault) Error() string { return f.msg }

func faultf(format string, a ...any) error { return &bundleFault{msg: fmt.Sprintf(format, a...)} }

// Import verifies the bundle at path and adds its images to store.
//
// Every name and digest is checked against what Export writes before it is used
// (check.go); blobs are streamed into one staging directory opened once as an
// os.Root, hashed on the way, and every image is checked against its blobs before
// anything is committed. A bundle that fails any check imports nothing and leaves no
// staged file behind.
func Import(path string, store *images.Store) ([]images.Stored, error) {
	f, err := openBundle(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, done, err := decompressed(f)
	if err != nil {
		return nil, fmt.Errorf("bundle %s is corrupt: %v; nothing was imported (make a new one with osd images export): %w", path, err, ErrBad)
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
		return nil, fmt.Errorf("import bundle: %s is not a regular file (mode %s): give the file osd images export wrote: %w", path, fi.Mode().Type(), ErrBad)
	}
	return f, nil
}

// importBundle reads a bundle from r (called name in messages) into store.
func importBundle(r io.Reader, name string, store *images.Store) ([]images.Stored, error) {
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
		return nil, fmt.Errorf("bundle %s is truncated, corrupt or not an osd bundle: %s; nothing was imported (make a new one with osd images export): %w", name, f.msg, ErrBad)
	}
	if err != nil {
		return nil, fmt.Errorf("import bundle %s: %w; nothing was imported", name, err)
	}
	blobs := make([]images.StagedBlob, len(m.Blobs))
	for i, b := range m.Blobs {
		hex, _ := digestHex(b.Digest) // checked by checkManifest
		blobs[i] = images.StagedBlob{Path: stg.path(hex), Digest: v1.Hash{Algorithm: "sha256", Hex: hex}, Size: b.Size}
	}
	return store.CommitImport(blobs, m.Images)
}

// readBundle reads bundle.json (first), checks it, then every other entry against the
// allow-list, staging each listed blob. It returns the manifest and hex digest -> size.
func readBundle(r io.Reader, stg *stage) (*Manifest, map[string]int64, error) {
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
	var m Manifest
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
func checkStagedImage(stg *stage, st images.Stored, sizes map[string]int64) error {
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
