// Package ctrimport loads images built by package images into a running
// containerd (the embedded k3s's, namespace k8s.io) through the containerd
// v2 client, and unpacks them so the first pod does not wait for it. It is
// separate from package images so that only its users link the client.
//
// Blobs go straight into containerd's content store (no archive stream):
// those it holds already (a layer shared with an image imported before) are
// skipped, and with Options.ContentDir a blob file of the image store is
// hard-linked into containerd's content directory, so containerd takes it
// without a byte copied. The image then gets its record and is unpacked into
// the snapshotter, where a shared layer is unpacked once.
package ctrimport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	cimages "github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Namespace is the containerd namespace the kubelet's CRI uses.
const Namespace = "k8s.io"

// PinnedLabel marks images the kubelet's image garbage collection must keep
// (the CRI plugin reports them as pinned), as k3s does for preloaded images.
const PinnedLabel = "io.cri-containerd.pinned"

// Options tune an import.
type Options struct {
	// ContentDir is containerd's content store directory (ROOT/io.containerd.content.v1.content);
	// with BlobPath, blobs are hard-linked into it when they are on the same filesystem.
	ContentDir string
	// BlobPath is the file holding a blob in the image store ("" when it has none).
	BlobPath func(v1.Hash) string
}

// Import puts img into the containerd at socket under ref (namespace k8s.io), keeping
// its manifest digest, and unpacks it into the namespace's default snapshotter. The
// image is labeled pinned so the kubelet's image GC keeps it.
func Import(ctx context.Context, socket string, img v1.Image, ref string) error {
	return ImportMany(ctx, socket, map[string]v1.Image{ref: img}, Options{})
}

// ImportMany is Import for several images.
func ImportMany(ctx context.Context, socket string, refs map[string]v1.Image, opts Options) error {
	c, err := containerd.New(socket, containerd.WithDefaultNamespace(Namespace), containerd.WithTimeout(10*time.Second))
	if err != nil {
		return fmt.Errorf("import images: connect to containerd %s: %w", socket, err)
	}
	defer c.Close()
	ctx = namespaces.WithNamespace(ctx, Namespace)
	for ref, img := range refs {
		if err := importOne(ctx, c, img, ref, opts); err != nil {
			return fmt.Errorf("import %s into containerd: %w", ref, err)
		}
	}
	return nil
}

// importOne writes img's blobs (layers and config first, the manifest last with the
// labels that keep them from containerd's garbage collection), records the image and
// unpacks it, all under a lease.
func importOne(ctx context.Context, c *containerd.Client, img v1.Image, ref string, opts Options) error {
	ctx, done, err := c.WithLease(ctx)
	if err != nil {
		return err
	}
	defer done(context.WithoutCancel(ctx))
	cs := c.ContentStore()
	m, err := img.Manifest()
	if err != nil {
		return err
	}
	rawManifest, err := img.RawManifest()
	if err != nil {
		return err
	}
	mt, err := img.MediaType()
	if err != nil {
		return err
	}
	labels := map[string]string{"containerd.io/gc.ref.content.config": m.Config.Digest.String()}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for i, l := range layers {
		d := m.Layers[i]
		labels["containerd.io/gc.ref.content.l."+strconv.Itoa(i)] = d.Digest.String()
		if err := writeBlob(ctx, cs, d, l.Compressed, opts); err != nil {
			return fmt.Errorf("layer %s: %w", d.Digest, err)
		}
	}
	rawConfig, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	if err := writeBlob(ctx, cs, m.Config, bytesOpener(rawConfig), opts); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	md, err := img.Digest()
	if err != nil {
		return err
	}
	target := ocispec.Descriptor{MediaType: string(mt), Digest: digest.Digest(md.String()), Size: int64(len(rawManifest))}
	if err := content.WriteBlob(ctx, cs, "osd-import-"+md.Hex, bytes.NewReader(rawManifest), target, content.WithLabels(labels)); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	if err := setLabels(ctx, cs, target.Digest, labels); err != nil {
		return err
	}
	// Unpack first, record last: a record means the image is ready to run. (A record made
	// before the unpack outlived a daemon killed while it unpacked; the kubelet then unpacked
	// the image itself, once for every pod creating a container, and each attempt that
	// timed out on a loaded host left its partial snapshot on disk: tens of GB.)
	record := cimages.Image{Name: ref, Target: target, Labels: map[string]string{PinnedLabel: "pinned"}}
	if err := containerd.NewImage(c, record).Unpack(ctx, ""); err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	is := c.ImageService()
	if _, err := is.Create(ctx, record); errdefs.IsAlreadyExists(err) {
		_, err = is.Update(ctx, record, "target", "labels")
		return err
	} else if err != nil {
		return err
	}
	return nil
}

// Imported says whether the containerd at socket holds ref at the manifest digest want
// and has unpacked it into the default snapshotter. A record alone is not enough: an
// image recorded but not unpacked (by an earlier osd, or by a daemon killed at the wrong
// moment) is imported again, which writes no blob that is there already and unpacks
// only the layers that are not.
func Imported(ctx context.Context, socket, ref, want string) (bool, error) {
	c, err := containerd.New(socket, containerd.WithDefaultNamespace(Namespace), containerd.WithTimeout(10*time.Second))
	if err != nil {
		return false, fmt.Errorf("connect to containerd %s: %w", socket, err)
	}
	defer c.Close()
	ctx = namespaces.WithNamespace(ctx, Namespace)
	img, err := c.GetImage(ctx, ref)
	if errdefs.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if img.Target().Digest.String() != want {
		return false, nil
	}
	ok, err := img.IsUnpacked(ctx, "")
	if err != nil {
		return false, fmt.Errorf("is %s unpacked: %w", ref, err)
	}
	return ok, nil
}

// setLabels makes sure a blob that was there already carries labels.
func setLabels(ctx context.Context, cs content.Store, d digest.Digest, labels map[string]string) error {
	info := content.Info{Digest: d, Labels: labels}
	var fields []string
	for k := range labels {
		fields = append(fields, "labels."+k)
	}
	_, err := cs.Update(ctx, info, fields...)
	return err
}

// writeBlob puts one blob into the content store unless it is there: hard-linked from
// the image store into containerd's content directory when possible (containerd then
// records it without reading it), else copied through the content API.
func writeBlob(ctx context.Context, cs content.Store, d v1.Descriptor, open func() (io.ReadCloser, error), opts Options) error {
	dg := digest.Digest(d.Digest.String())
	if _, err := cs.Info(ctx, dg); err == nil {
		return nil
	} else if !errdefs.IsNotFound(err) {
		return err
	}
	desc := ocispec.Descriptor{MediaType: string(d.MediaType), Digest: dg, Size: d.Size}
	if opts.ContentDir != "" && opts.BlobPath != nil {
		if src := opts.BlobPath(d.Digest); src != "" {
			dst := filepath.Join(opts.ContentDir, "blobs", d.Digest.Algorithm, d.Digest.Hex)
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
				if err := os.Link(src, dst); err == nil || errors.Is(err, os.ErrExist) {
					if f, err := os.Open(dst); err == nil {
						defer f.Close()
						return content.WriteBlob(ctx, cs, "osd-import-"+d.Digest.Hex, f, desc)
					}
				}
			}
		}
	}
	rc, err := open()
	if err != nil {
		return err
	}
	defer rc.Close()
	return content.WriteBlob(ctx, cs, "osd-import-"+d.Digest.Hex, rc, desc)
}

func bytesOpener(b []byte) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}
