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
	var st api.InitState
	return st, c.Query(ctx, "GET", "init", nil, &st)
}

// Deployment is the OpenStack deployment's status (GET /1.0/deployment).
func (c *Client) Deployment(ctx context.Context) (api.DeploymentStatus, error) {
	var st api.DeploymentStatus
	return st, c.Query(ctx, "GET", "deployment", nil, &st)
}

// Operation is one operation with its events (GET /1.0/operations/{id}).
func (c *Client) Operation(ctx context.Context, id string) (api.Operation, error) {
	var op api.Operation
	return op, c.Query(ctx, "GET", "operations/"+url.PathEscape(id), nil, &op)
}

// Operations lists the operations kept (GET /1.0/operations).
func (c *Client) Operations(ctx context.Context) ([]api.Operation, error) {
	var ops []api.Operation
	return ops, c.Query(ctx, "GET", "operations", nil, &ops)
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
	var st api.JoinStatus
	return st, c.Query(ctx, "GET", "cluster/join-remote", nil, &st)
}

// Images is the image catalog and store (GET /1.0/images).
func (c *Client) Images(ctx context.Context) ([]api.ImageStatus, error) {
	var out []api.ImageStatus
	return out, c.Query(ctx, "GET", "images", nil, &out)
}

// BuildImages builds images as an operation (POST /1.0/images/build).
func (c *Client) BuildImages(ctx context.Context, names []string) (api.Operation, error) {
	var op api.Operation
	return op, c.Query(ctx, "POST", "images/build", api.ImagesRequest{Names: names}, &op)
}

// ExportImages writes an airgap bundle on the daemon's host (POST /1.0/images/export).
func (c *Client) ExportImages(ctx context.Context, req api.ImagesRequest) ([]api.StoredImage, error) {
	var out []api.StoredImage
	return out, c.Query(ctx, "POST", "images/export", req, &out)
}

// ImportImages verifies and imports an airgap bundle (POST /1.0/images/import).
func (c *Client) ImportImages(ctx context.Context, req api.ImagesRequest) ([]api.StoredImage, error) {
	var out []api.StoredImage
	return out, c.Query(ctx, "POST", "images/import", req, &out)
}

// Launch boots a test server as an operation (POST /1.0/instances).
func (c *Client) Launch(ctx context.Context, req api.LaunchRequest) (api.Operation, error) {
	var op api.Operation
	return op, c.Query(ctx, "POST", "instances", req, &op)
}

// Members lists the cluster's members (GET /1.0/cluster/members).
func (c *Client) Members(ctx context.Context) ([]api.Member, error) {
	var out []api.Member
	return out, c.Query(ctx, "GET", "cluster/members", nil, &out)
}

// IssueToken issues a join token (POST /1.0/cluster/tokens).
func (c *Client) IssueToken(ctx context.Context, req api.TokenRequest) (api.IssuedToken, error) {
	var tok api.IssuedToken
	return tok, c.Query(ctx, "POST", "cluster/tokens", req, &tok)
}

// Tokens lists the join tokens (GET /1.0/cluster/tokens).
func (c *Client) Tokens(ctx context.Context) ([]api.TokenInfo, error) {
	var out []api.TokenInfo
	return out, c.Query(ctx, "GET", "cluster/tokens", nil, &out)
}
