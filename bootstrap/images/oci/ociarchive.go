package oci

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Index annotations an archive's images carry: AnnotationContainerdName is the one
// containerd's importer names an image by, AnnotationRefName the OCI image layout's
// reference.
const (
	AnnotationContainerdName = "io.containerd.image.name"
	AnnotationRefName        = "org.opencontainers.image.ref.name"
)

// Blob is one blob to put in an archive: its digest and size, and how to read it.
type Blob struct {
	Digest v1.Hash
	Size   int64
	open   func() (io.ReadCloser, error)
}

// ArchiveImage is one image of an OCI archive with its index annotations.
type ArchiveImage struct {
	Image       v1.Image
	Annotations map[string]string
}

// imageBlobs lists an image's manifest, config and layer blobs.
func imageBlobs(img v1.Image) ([]Blob, v1.Descriptor, error) {
	raw, err := img.RawManifest()
	if err != nil {
		return nil, v1.Descriptor{}, err
	}
	mt, err := img.MediaType()
	if err != nil {
		return nil, v1.Descriptor{}, err
	}
	d, err := img.Digest()
	if err != nil {
		return nil, v1.Descriptor{}, err
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return nil, v1.Descriptor{}, err
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		return nil, v1.Descriptor{}, err
	}
	blobs := []Blob{
		{Digest: d, Size: int64(len(raw)), open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil }},
		{Digest: cfgName, Size: int64(len(cfg)), open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(cfg)), nil }},
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, v1.Descriptor{}, err
	}
	for _, l := range layers {
		ld, err := l.Digest()
		if err != nil {
			return nil, v1.Descriptor{}, err
		}
		ls, err := l.Size()
		if err != nil {
			return nil, v1.Descriptor{}, err
		}
		blobs = append(blobs, Blob{Digest: ld, Size: ls, open: l.Compressed})
	}
	desc := v1.Descriptor{MediaType: mt, Digest: d, Size: int64(len(raw)),
		Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}
	return blobs, desc, nil
}

// WriteLayout writes images as a tar of an OCI image layout
// (oci-layout, index.json, blobs/sha256/...), which containerd's importer
// (k3s agent/images, `ctr images import`, client.Import) reads keeping the
// manifests, so image digests stay the same. first, if set, writes entries
// before everything else; blobs are deduplicated and sorted.
func WriteLayout(w io.Writer, imgs []ArchiveImage, first func(*tar.Writer, []Blob) error) error {
	var all []Blob
	seen := map[v1.Hash]bool{}
	index := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex}
	for _, ai := range imgs {
		blobs, desc, err := imageBlobs(ai.Image)
		if err != nil {
			return err
		}
		desc.Annotations = ai.Annotations
		index.Manifests = append(index.Manifests, desc)
		for _, b := range blobs {
			if !seen[b.Digest] {
				seen[b.Digest] = true
				all = append(all, b)
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Digest.String() < all[j].Digest.String() })
	tw := tar.NewWriter(w)
	if first != nil {
		if err := first(tw, all); err != nil {
			return err
		}
	}
	if err := WriteTarBytes(tw, "oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	for _, b := range all {
		if err := writeTarBlob(tw, b); err != nil {
			return err
		}
	}
	idx, err := json.Marshal(index)
	if err != nil {
		return err
	}
	if err := WriteTarBytes(tw, "index.json", idx); err != nil {
		return err
	}
	return tw.Close()
}

// WriteTarBytes writes data as the regular file name (mode 0644, at the epoch) to tw.
func WriteTarBytes(tw *tar.Writer, name string, data []byte) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: Epoch, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

func writeTarBlob(tw *tar.Writer, b Blob) error {
	name := "blobs/" + b.Digest.Algorithm + "/" + b.Digest.Hex
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: b.Size, ModTime: Epoch, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	rc, err := b.open()
	if err != nil {
		return err
	}
	defer rc.Close()
	n, err := io.Copy(tw, rc)
	if err != nil {
		return fmt.Errorf("write blob %s: %w", b.Digest, err)
	}
	if n != b.Size {
		return fmt.Errorf("write blob %s: %d bytes, want %d", b.Digest, n, b.Size)
	}
	return nil
}

// WriteOCIArchive writes refs (reference -> image) as an OCI layout tarball
// for containerd (k3s imports it from <data-dir>/agent/images/ like a
// docker-save archive); unlike a docker-save archive it keeps each image's
// manifest, so containerd reports the same digest as the store.
func WriteOCIArchive(w io.Writer, refs map[string]v1.Image) error {
	if len(refs) == 0 {
		return fmt.Errorf("write image archive: no images")
	}
	names := make([]string, 0, len(refs))
	for r := range refs {
		names = append(names, r)
	}
	sort.Strings(names)
	var imgs []ArchiveImage
	for _, r := range names {
		full, err := FullRef(r)
		if err != nil {
			return fmt.Errorf("write image archive: %w", err)
		}
		imgs = append(imgs, ArchiveImage{Image: refs[r], Annotations: map[string]string{
			AnnotationContainerdName: full, AnnotationRefName: full}})
	}
	if err := WriteLayout(w, imgs, nil); err != nil {
		return fmt.Errorf("write image archive: %w", err)
	}
	return nil
}
