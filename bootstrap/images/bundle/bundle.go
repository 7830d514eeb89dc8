package bundle

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"runtime"

	"github.com/klauspost/compress/zstd"

	"github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/bootstrap/images/oci"
)

// An airgap bundle is one tar file: bundle.json first (format version, the
// images with name, reference, digest and recipe hash, and every blob's
// digest and size), then an OCI image layout (oci-layout, blobs/sha256/...,
// index.json). The files osd writes (ExportFile, WriteFile) are
// compressed with zstd on every core: the layers are not compressed in the
// store, so the bundle, which crosses a network or a USB stick, is where
// compression pays. Import reads both forms; decompressed (zstd -d),
// `ctr images import` reads a bundle too.

const (
	bundleManifestName = "bundle.json"
	bundleVersion      = 1
)

// Manifest is the bundle's table of contents.
type Manifest struct {
	Version int             `json:"version"`
	Images  []images.Stored `json:"images"`
	Blobs   []Blob          `json:"blobs"`
}

// Blob is one blob of a bundle.
type Blob struct {
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// Export writes the named images of store (all when names is empty)
// to w as an airgap bundle.
func Export(w io.Writer, store *images.Store, names ...string) ([]images.Stored, error) {
	all, err := store.List()
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var sel []images.Stored
	var imgs []oci.ArchiveImage
	for _, st := range all {
		if len(names) > 0 && !want[st.Name] {
			continue
		}
		delete(want, st.Name)
		img, _, err := store.Get(st.Name)
		if err != nil {
			return nil, err
		}
		full, err := oci.FullRef(st.Ref)
		if err != nil {
			return nil, err
		}
		sel = append(sel, st)
		ann := st.Annotations()
		ann[oci.AnnotationContainerdName] = full
		imgs = append(imgs, oci.ArchiveImage{Image: img, Annotations: ann})
	}
	for n := range want {
		return nil, fmt.Errorf("export bundle: image %s is not built (osd images build %s makes it): %w", n, n, images.ErrNotStored)
	}
	if len(sel) == 0 {
		return nil, fmt.Errorf("export bundle: no images")
	}
	err = oci.WriteLayout(w, imgs, func(tw *tar.Writer, blobs []oci.Blob) error {
		m := Manifest{Version: bundleVersion, Images: sel}
		for _, b := range blobs {
			m.Blobs = append(m.Blobs, Blob{Digest: b.Digest.String(), Size: b.Size})
		}
		data, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			return err
		}
		return oci.WriteTarBytes(tw, bundleManifestName, data)
	})
	if err != nil {
		return nil, fmt.Errorf("export bundle: %w", err)
	}
	return sel, nil
}

// ExportFile writes the bundle to path atomically, compressed.
func ExportFile(path string, store *images.Store, names ...string) ([]images.Stored, error) {
	var sel []images.Stored
	err := writeFileAtomic(path, func(w io.Writer) error {
		var err error
		sel, err = exportCompressed(w, store, names...)
		return err
	})
	return sel, err
}

// exportCompressed is Export through a zstd encoder using every core.
func exportCompressed(w io.Writer, store *images.Store, names ...string) ([]images.Stored, error) {
	zw, err := zstd.NewWriter(w, zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)), zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		return nil, fmt.Errorf("export bundle: %w", err)
	}
	sel, err := Export(zw, store, names...)
	if err != nil {
		zw.Close()
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("export bundle: %w", err)
	}
	return sel, nil
}

// zstdMagic starts every zstd frame.
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// decompressed reads r, decompressing it when it starts as zstd.
func decompressed(r io.Reader) (io.Reader, func(), error) {
	br := bufio.NewReaderSize(r, 1<<20)
	if head, err := br.Peek(4); err != nil || !bytes.Equal(head, zstdMagic) {
		return br, func() {}, nil // a plain tar (or too short: the tar reader says so)
	}
	zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)))
	if err != nil {
		return nil, nil, err
	}
	return zr, zr.Close, nil
}
