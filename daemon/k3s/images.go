package k3s

import (
	"context"
	"fmt"
	"io"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
)

// criPinnedLabel keeps the kubelet's image garbage collector away from an image: osd's
// images are built locally and cannot be pulled again.
const criPinnedLabel = "io.cri-containerd.pinned"

// ImportArchive imports an image archive (docker-save or OCI layout tar) into the
// Kubernetes namespace of the containerd at socket, pins the images, and returns their names.
func ImportArchive(ctx context.Context, socket string, r io.Reader) ([]string, error) {
	cl, err := containerd.New(socket, containerd.WithTimeout(5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("connect containerd: %w", err)
	}
	defer cl.Close()
	ctx = namespaces.WithNamespace(ctx, "k8s.io")
	imgs, err := cl.Import(ctx, r, containerd.WithAllPlatforms(true), containerd.WithImportCompression())
	if err != nil {
		return nil, fmt.Errorf("import images: %w", err)
	}
	var names []string
	is := cl.ImageService()
	for _, img := range imgs {
		if img.Labels == nil {
			img.Labels = map[string]string{}
		}
		if img.Labels[criPinnedLabel] != "pinned" {
			img.Labels[criPinnedLabel] = "pinned"
			if _, err := is.Update(ctx, img, "labels."+criPinnedLabel); err != nil {
				return nil, fmt.Errorf("pin image %s: %w", img.Name, err)
			}
		}
		names = append(names, img.Name)
	}
	return names, nil
}

// HasImage reports whether containerd already holds the image ref in the Kubernetes namespace.
func HasImage(ctx context.Context, socket, ref string) (bool, error) {
	cl, err := containerd.New(socket, containerd.WithTimeout(5*time.Second))
	if err != nil {
		return false, fmt.Errorf("connect containerd: %w", err)
	}
	defer cl.Close()
	ctx = namespaces.WithNamespace(ctx, "k8s.io")
	_, err = cl.ImageService().Get(ctx, ref)
	if err == nil {
		return true, nil
	}
	if errdefs.IsNotFound(err) {
		return false, nil
	}
	return false, err
}

// ImageDigest returns the manifest digest containerd holds for ref in the Kubernetes
// namespace ("" if it holds no such image).
func ImageDigest(ctx context.Context, socket, ref string) (string, error) {
	cl, err := containerd.New(socket, containerd.WithTimeout(5*time.Second))
	if err != nil {
		return "", fmt.Errorf("connect containerd: %w", err)
	}
	defer cl.Close()
	ctx = namespaces.WithNamespace(ctx, "k8s.io")
	img, err := cl.ImageService().Get(ctx, ref)
	if errdefs.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return img.Target.Digest.String(), nil
}
