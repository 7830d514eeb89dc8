package client

import (
	"context"
	"net/url"
	"strings"

	"github.com/osdcloud/osd/daemon/api"
)

// OperationID is the id in an async envelope's operation URL.
func OperationID(env *api.Response) string {
	return strings.TrimPrefix(env.Operation, "/1.0/operations/")
}

// Init starts converging the daemon's host (POST /1.0/init) and returns the run's
// operation id and its state.
func (c *Client) Init(ctx context.Context, req api.InitRequest) (string, api.InitState, error) {
	var st api.InitState
	env, err := c.Raw(ctx, "POST", "init", req)
	if err != nil {
		return "", st, err
	}
	return OperationID(env), st, env.MetadataAs(&st)
}

// InitState is the current or last converge run (GET /1.0/init).
func (c *Client) InitState(ctx context.Context) (api.InitState, error) {
	return query[api.InitState](ctx, c, "GET", "init", nil)
}

// Deployment is the OpenStack deployment's status (GET /1.0/deployment).
func (c *Client) Deployment(ctx context.Context) (api.DeploymentStatus, error) {
	return query[api.DeploymentStatus](ctx, c, "GET", "deployment", nil)
}

// Storage is the block storage backend and, with Ceph, its health (GET /1.0/storage).
func (c *Client) Storage(ctx context.Context) (api.StorageStatus, error) {
	return query[api.StorageStatus](ctx, c, "GET", "storage", nil)
}

// Operation is one operation with its events (GET /1.0/operations/{id}).
func (c *Client) Operation(ctx context.Context, id string) (api.Operation, error) {
	return query[api.Operation](ctx, c, "GET", "operations/"+url.PathEscape(id), nil)
}

// Operations lists the operations kept (GET /1.0/operations).
func (c *Client) Operations(ctx context.Context) ([]api.Operation, error) {
	return query[[]api.Operation](ctx, c, "GET", "operations", nil)
}

// CancelOperation cancels a running operation (DELETE /1.0/operations/{id}).
func (c *Client) CancelOperation(ctx context.Context, id string) error {
	return c.Query(ctx, "DELETE", "operations/"+url.PathEscape(id), nil, nil)
}

// Join joins the daemon's host to the cluster a token names (POST
// /1.0/cluster/join-remote); done says the node already was a member (no operation).
func (c *Client) Join(ctx context.Context, req api.JoinRemoteRequest) (op string, st api.JoinStatus, done bool, err error) {
	env, err := c.Raw(ctx, "POST", "cluster/join-remote", req)
	if err != nil {
		return "", st, false, err
	}
	if err := env.MetadataAs(&st); err != nil {
		return "", st, false, err
	}
	return OperationID(env), st, env.Type == api.SyncResponse, nil
}

// JoinStatus is how far this host's join is (GET /1.0/cluster/join-remote).
func (c *Client) JoinStatus(ctx context.Context) (api.JoinStatus, error) {
	return query[api.JoinStatus](ctx, c, "GET", "cluster/join-remote", nil)
}

// Images is the image catalog and store (GET /1.0/images).
func (c *Client) Images(ctx context.Context) ([]api.ImageStatus, error) {
	return query[[]api.ImageStatus](ctx, c, "GET", "images", nil)
}

// BuildImages builds images as an operation (POST /1.0/images/build).
func (c *Client) BuildImages(ctx context.Context, names []string) (api.Operation, error) {
	return query[api.Operation](ctx, c, "POST", "images/build", api.ImagesRequest{Names: names})
}

// ExportImages writes an airgap bundle on the daemon's host (POST /1.0/images/export).
func (c *Client) ExportImages(ctx context.Context, req api.ImagesRequest) ([]api.StoredImage, error) {
	return query[[]api.StoredImage](ctx, c, "POST", "images/export", req)
}

// ImportImages verifies and imports an airgap bundle (POST /1.0/images/import).
func (c *Client) ImportImages(ctx context.Context, req api.ImagesRequest) ([]api.StoredImage, error) {
	return query[[]api.StoredImage](ctx, c, "POST", "images/import", req)
}

// Launch boots a test server as an operation (POST /1.0/instances).
func (c *Client) Launch(ctx context.Context, req api.LaunchRequest) (api.Operation, error) {
	return query[api.Operation](ctx, c, "POST", "instances", req)
}

// Members lists the cluster's members (GET /1.0/cluster/members).
func (c *Client) Members(ctx context.Context) ([]api.Member, error) {
	return query[[]api.Member](ctx, c, "GET", "cluster/members", nil)
}

// IssueToken issues a join token (POST /1.0/cluster/tokens).
func (c *Client) IssueToken(ctx context.Context, req api.TokenRequest) (api.IssuedToken, error) {
	return query[api.IssuedToken](ctx, c, "POST", "cluster/tokens", req)
}

// Tokens lists the join tokens (GET /1.0/cluster/tokens).
func (c *Client) Tokens(ctx context.Context) ([]api.TokenInfo, error) {
	return query[[]api.TokenInfo](ctx, c, "GET", "cluster/tokens", nil)
}

// query is Query into a fresh value of T.
func query[T any](ctx context.Context, c *Client, method, path string, body any) (T, error) {
	var out T
	err := c.Query(ctx, method, path, body, &out)
	return out, err
}
