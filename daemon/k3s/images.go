package k3s

import (
	"context"
	"fmt"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
)

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
