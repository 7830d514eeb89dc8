package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"

	"github.com/osdcloud/osd/daemon/api"
)

// maxResponse bounds how much of an envelope the client reads.
const maxResponse = 64 << 20

// Client talks to one osd daemon.
type Client struct {
	http   *http.Client
	base   string // scheme and host, e.g. "http://osd" or "https://10.0.0.2:7443"
	socket string // set for unix-socket clients, for error messages
}

// NewUnix returns a client for the daemon listening on the unix socket at socketPath.
func NewUnix(socketPath string) *Client {
	dialer := &net.Dialer{}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", socketPath)
		},
		MaxIdleConns:      4,
		DisableKeepAlives: false,
	}
	return &Client{http: &http.Client{Transport: tr}, base: "http://osd", socket: socketPath}
}

// New returns a client for the daemon at baseURL (e.g. "https://10.0.0.2:7443") using hc,
// which carries the TLS configuration.
func New(baseURL string, hc *http.Client) *Client {
	return &Client{http: hc, base: strings.TrimRight(baseURL, "/")}
}

// URL returns the absolute URL of path relative to /1.0.
func (c *Client) URL(path string) string {
	p := strings.TrimPrefix(path, "/")
	if p == "1.0" {
		p = ""
	} else {
		p = strings.TrimPrefix(p, "1.0/")
	}
	u := c.base + "/1.0"
	if p != "" {
		if !strings.HasPrefix(p, "?") {
			u += "/"
		}
		u += p
	}
	return u
}

// Query sends body (JSON-encoded unless nil) with method to path (relative to /1.0, e.g.
// "status" or "images/x?force=1") and decodes the answer's metadata into out (if non-nil).
// An error envelope comes back as *Error.
func (c *Client) Query(ctx context.Context, method, path string, body any, out any) error {
	env, err := c.Raw(ctx, method, path, body)
	if err != nil {
		return err
	}
	if err := env.MetadataAs(out); err != nil {
		return fmt.Errorf("decode %s %s answer: %w", method, path, err)
	}
	return nil
}

// Raw is Query returning the whole envelope, for callers that need the operation URL.
func (c *Client) Raw(ctx context.Context, method, path string, body any) (*api.Response, error) {
	resp, err := c.do(ctx, method, path, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	env, err := decodeEnvelope(resp)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if env.Type == api.ErrorResponse {
		code := env.ErrorCode
		if code == 0 {
			code = resp.StatusCode
		}
		return nil, &Error{StatusCode: code, Message: env.Error}
	}
	return env, nil
}

// Stream sends the request and returns the raw body of a successful answer (an event
// stream, a file); the caller closes it. Error envelopes come back as *Error.
func (c *Client) Stream(ctx context.Context, method, path string, body any) (io.ReadCloser, error) {
	resp, err := c.do(ctx, method, path, body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 300 {
		return resp.Body, nil
	}
	defer resp.Body.Close()
	env, err := decodeEnvelope(resp)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil, &Error{StatusCode: resp.StatusCode, Message: env.Error}
}

// ServerInfo returns what the daemon says about itself (GET /1.0).
func (c *Client) ServerInfo(ctx context.Context) (api.ServerInfo, error) {
	var info api.ServerInfo
	err := c.Query(ctx, http.MethodGet, "", nil, &info)
	return info, err
}

func (c *Client) do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		switch b := body.(type) {
		case io.Reader:
			rd = b
		case []byte:
			rd = bytes.NewReader(b)
		default:
			buf, err := json.Marshal(body)
			if err != nil {
				return nil, fmt.Errorf("encode %s %s request: %w", method, path, err)
			}
			rd = bytes.NewReader(buf)
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, c.URL(path), rd)
	if err != nil {
		return nil, fmt.Errorf("build %s %s request: %w", method, path, err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "osd/"+api.Version)
	resp, err := c.http.Do(req)
	if err != nil {
		if c.socket != "" {
			if e := explainDial(c.socket, err); e != nil {
				return nil, e
			}
		}
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return nil, fmt.Errorf("%s %s: %w", method, path, ctxErr)
		}
		return nil, fmt.Errorf("query osd daemon: %w", err)
	}
	return resp, nil
}

func decodeEnvelope(resp *http.Response) (*api.Response, error) {
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return nil, fmt.Errorf("read answer: %w", err)
	}
	if len(data) > maxResponse {
		return nil, fmt.Errorf("answer larger than %d bytes", maxResponse)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var env api.Response
	if mt != "application/json" || json.Unmarshal(data, &env) != nil || env.Type == "" {
		return nil, fmt.Errorf("unexpected answer from the daemon: HTTP %d %s: %q",
			resp.StatusCode, mt, truncate(string(data), 200))
	}
	return &env, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// StreamFrom is Stream for a GET of path's bytes from offset on (an HTTP range): it
// returns the body and the offset it really starts at (0 when the server sent the whole
// resource instead of the range).
func (c *Client) StreamFrom(ctx context.Context, path string, offset int64) (io.ReadCloser, int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL(path), nil)
	if err != nil {
		return nil, 0, fmt.Errorf("build GET %s request: %w", path, err)
	}
	req.Header.Set("User-Agent", "osd/"+api.Version)
	if offset > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", offset))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("GET %s: %w", path, err)
	}
	switch {
	case resp.StatusCode == http.StatusPartialContent && offset > 0:
		return resp.Body, offset, nil
	case resp.StatusCode == http.StatusOK:
		return resp.Body, 0, nil
	}
	defer resp.Body.Close()
	env, err := decodeEnvelope(resp)
	if err != nil {
		return nil, 0, fmt.Errorf("GET %s: %w", path, err)
	}
	return nil, 0, &Error{StatusCode: resp.StatusCode, Message: env.Error}
}
