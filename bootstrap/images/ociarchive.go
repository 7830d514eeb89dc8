package images

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

// annotationContainerdName is the index annotation containerd's importer
// names an image by.
const annotationContainerdName = "io.containerd.image.name"

// blobRef is one blob to put in an archive.
type blobRef struct {
	digest v1.Hash
	size   int64
	open   func() (io.ReadCloser, error)
}

// archiveImage is one image of an OCI archive with its index annotations.
type archiveImage struct {
	img         v1.Image
	annotations map[string]string
}

// imageBlobs lists an image's manifest, config and layer blobs.
func imageBlobs(img v1.Image) ([]blobRef, v1.Descriptor, error) {
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
	blobs := []blobRef{
		{digest: d, size: int64(len(raw)), open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil }},
		{digest: cfgName, size: int64(len(cfg)), open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(cfg)), nil }},
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
		blobs = append(blobs, blobRef{digest: ld, size: ls, open: l.Compressed})
	}
	desc := v1.Descriptor{MediaType: mt, Digest: d, Size: int64(len(raw)),
		Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}
	return blobs, desc, nil
}

// writeOCIArchive writes images as a tar of an OCI image layout
// (oci-layout, index.json, blobs/sha256/...), which containerd's importer
// (k3s agent/images, `ctr images import`, client.Import) reads keeping the
// manifests, so image digests stay the same. first, if set, writes entries
// before everything else; blobs are deduplicated and sorted.
func writeOCIArchive(w io.Writer, imgs []archiveImage, first func(*tar.Writer, []blobRef) error) error {
	var all []blobRef
	seen := map[v1.Hash]bool{}
	index := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex}
	for _, ai := range imgs {
		blobs, desc, err := imageBlobs(ai.img)
		if err != nil {
			return err
		}
		desc.Annotations = ai.annotations
		index.Manifests = append(index.Manifests, desc)
		for _, b := range blobs {
			if !seen[b.digest] {
				seen[b.digest] = true
				all = append(all, b)
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].digest.String() < all[j].digest.String() })
	tw := tar.NewWriter(w)
	if first != nil {
		if err := first(tw, all); err != nil {
			return err
		}
	}
	if err := writeTarBytes(tw, "oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
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
	if err := writeTarBytes(tw, "index.json", idx); err != nil {
		return err
	}
	return tw.Close()
}

func writeTarBytes(tw *tar.Writer, name string, data []byte) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: timeEpoch, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

func writeTarBlob(tw *tar.Writer, b blobRef) error {
	name := "blobs/" + b.digest.Algorithm + "/" + b.digest.Hex
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: b.size, ModTime: timeEpoch, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	rc, err := b.open()
	if err != nil {
		return err
	}
	defer rc.Close()
	n, err := io.Copy(tw, rc)
	if err != nil {
		return fmt.Errorf("write blob %s: %w", b.digest, err)
	}
	if n != b.size {
		return fmt.Errorf("write blob %s: %d bytes, want %d", b.digest, n, b.size)
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
	var imgs []archiveImage
	for _, r := range names {
		full, err := fullRef(r)
		if err != nil {
			return fmt.Errorf("write image archive: %w", err)
		}
		imgs = append(imgs, archiveImage{img: refs[r], annotations: map[string]string{
			annotationContainerdName: full, annotationRefName: full}})
	}
	if err := writeOCIArchive(w, imgs, nil); err != nil {
		return fmt.Errorf("write image archive: %w", err)
	}
	return nil
}
