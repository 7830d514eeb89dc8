package images

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"runtime"

	"github.com/klauspost/compress/zstd"

	"github.com/osdcloud/osd/bootstrap/images/oci"
)

// An airgap bundle is one tar file: bundle.json first (format version, the
// images with name, reference, digest and recipe hash, and every blob's
// digest and size), then an OCI image layout (oci-layout, blobs/sha256/...,
// index.json). The files osd writes (ExportBundleFile, WriteBundleFile) are
// compressed with zstd on every core: the layers are not compressed in the
// store, so the bundle, which crosses a network or a USB stick, is where
// compression pays. ImportBundle reads both forms; decompressed (zstd -d),
// `ctr images import` reads a bundle too.

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
		imgs = append(imgs, oci.ArchiveImage{Image: img, Annotations: map[string]string{
			oci.AnnotationContainerdName: full,
			annotationRefName:            st.Ref,
			annotationImage:              st.Name,
			annotationRecipe:             st.RecipeHash,
			annotationCacheKey:           st.CacheKey,
		}})
	}
	for n := range want {
		return nil, fmt.Errorf("export bundle: image %s is not built (osd images build %s makes it): %w", n, n, ErrNotStored)
	}
	if len(sel) == 0 {
		return nil, fmt.Errorf("export bundle: no images")
	}
	err = oci.WriteLayout(w, imgs, func(tw *tar.Writer, blobs []oci.Blob) error {
		m := BundleManifest{Version: bundleVersion, Images: sel}
		for _, b := range blobs {
			m.Blobs = append(m.Blobs, BundleBlob{Digest: b.Digest.String(), Size: b.Size})
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

// ExportBundleFile writes the bundle to path atomically, compressed.
func ExportBundleFile(path string, store *Store, names ...string) ([]Stored, error) {
	var sel []Stored
	err := writeFileAtomic(path, func(w io.Writer) error {
		var err error
		sel, err = exportCompressed(w, store, names...)
		return err
	})
	return sel, err
}

// exportCompressed is ExportBundle through a zstd encoder using every core.
func exportCompressed(w io.Writer, store *Store, names ...string) ([]Stored, error) {
	zw, err := zstd.NewWriter(w, zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)), zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		return nil, fmt.Errorf("export bundle: %w", err)
	}
	sel, err := ExportBundle(zw, store, names...)
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
