// Package ctrimport loads images built by package images into a running
// containerd (the embedded k3s's, namespace k8s.io) through the containerd
// v2 client, and unpacks them so the first pod does not wait for it. It is
// separate from package images so that only its users link the client.
package ctrimport

import (
	"context"
	"fmt"
	"io"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/osdcloud/osd/bootstrap/images"
)

// Namespace is the containerd namespace the kubelet's CRI uses.
const Namespace = "k8s.io"

// PinnedLabel marks images the kubelet's image garbage collection must keep
// (the CRI plugin reports them as pinned), as k3s does for preloaded images.
const PinnedLabel = "io.cri-containerd.pinned"

// Import streams img as an OCI archive (so containerd keeps its manifest
// digest) into the containerd at socket under ref (namespace k8s.io) and
// unpacks it into the namespace's default snapshotter. The image is labeled
// pinned so the kubelet's image GC keeps it.
func Import(ctx context.Context, socket string, img v1.Image, ref string) error {
	return ImportMany(ctx, socket, map[string]v1.Image{ref: img})
}

// ImportMany is Import for several images in one archive stream.
func ImportMany(ctx context.Context, socket string, refs map[string]v1.Image) error {
	c, err := containerd.New(socket, containerd.WithDefaultNamespace(Namespace), containerd.WithTimeout(10*time.Second))
	if err != nil {
		return fmt.Errorf("import images: connect to containerd %s: %w", socket, err)
	}
	defer c.Close()
	ctx = namespaces.WithNamespace(ctx, Namespace)
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(images.WriteOCIArchive(pw, refs)) }()
	imgs, err := c.Import(ctx, pr, containerd.WithAllPlatforms(true), containerd.WithImageLabels(map[string]string{PinnedLabel: "pinned"}))
	pr.CloseWithError(io.ErrClosedPipe) // stop the writer if Import gave up early
	if err != nil {
		return fmt.Errorf("import images into containerd: %w", err)
	}
	if len(imgs) != len(refs) {
		return fmt.Errorf("import images into containerd: %d images created, want %d", len(imgs), len(refs))
	}
	for _, i := range imgs {
		if err := containerd.NewImage(c, i).Unpack(ctx, ""); err != nil {
			return fmt.Errorf("unpack %s: %w", i.Name, err)
		}
	}
	return nil
}
