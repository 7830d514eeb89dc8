package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/client"
)

// ImageSource is where a member fetches the images of its roles from: the catalog and
// each blob by digest from an offset on (a BlobSource of package bootstrap/images).
// ClusterImages is the cluster's; the image resource takes any (images.Service's
// SyncFromCluster).
type ImageSource interface {
	List(ctx context.Context) ([]api.ImageStatus, error)
	Blob(ctx context.Context, h v1.Hash, offset int64) (io.ReadCloser, int64, error)
}

// ClusterImages is the member's view of the images the cluster serves: the catalog
// (GET /1.0/images) and each blob by digest (GET /1.0/images/blobs/{digest}, ranges
// allowed), over the member's certificate with the cluster CA pinned. It is a
// BlobSource of package bootstrap/images.
type ClusterImages struct {
	c *client.Client
	// Close drops the idle connections.
	Close func()
}

// NewClusterImages returns the images served by the member at addr, asked as id.
func NewClusterImages(id *MemberIdentity, addr string) (*ClusterImages, error) {
	cfg, err := ClientTLSConfigFor(Fingerprint(id.CA), addr, &id.Cert)
	if err != nil {
		return nil, err
	}
	hc := NewHTTPClient(cfg)
	return &ClusterImages{c: client.New("https://"+addr, hc), Close: hc.CloseIdleConnections}, nil
}

// List is the cluster's image catalog: name, reference and digest of each stored image.
func (ci *ClusterImages) List(ctx context.Context) ([]api.ImageStatus, error) {
	var out []api.ImageStatus
	if err := ci.c.Query(ctx, http.MethodGet, "images", nil, &out); err != nil {
		return nil, fmt.Errorf("the cluster's images: %w", err)
	}
	return out, nil
}

// Blob returns blob h from offset on (see bootstrap/images.BlobSource).
func (ci *ClusterImages) Blob(ctx context.Context, h v1.Hash, offset int64) (io.ReadCloser, int64, error) {
	return ci.c.StreamFrom(ctx, "images/blobs/"+h.String(), offset)
}
