package openstack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// ErrNoService is wrapped when the catalog lacks a service (e.g. Nova or
// Neutron not deployed yet).
var ErrNoService = errors.New("service not in the catalog")

// APIError is an OpenStack API's error answer, with its own message.
type APIError struct {
	Method  string
	URL     string
	Status  int
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.URL, e.Status, http.StatusText(e.Status), e.Message)
}

// IsNotFound reports whether err is an API answer 404.
func IsNotFound(err error) bool { return statusOf(err) == http.StatusNotFound }

// IsConflict reports whether err is an API answer 409.
func IsConflict(err error) bool { return statusOf(err) == http.StatusConflict }

func statusOf(err error) int {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

var htmlTag = regexp.MustCompile(`<[^>]*>`)

// ErrorMessage extracts the message from an OpenStack error body: Keystone
// {"error": {"message"}}, Nova {"itemNotFound": {"message"}} (any single
// key), Neutron {"NeutronError": {"type", "message"}}, Placement {"errors":
// [{"detail"}]}, Glance's {"message"} or plain text/HTML. The result is one
// line without markup, without jsonschema's dump, at most 500 bytes.
func ErrorMessage(body []byte) string {
	return cleanMessage(rawMessage(body))
}

func rawMessage(body []byte) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) == nil {
		if raw, ok := m["errors"]; ok {
			var list []struct{ Title, Detail string }
			if json.Unmarshal(raw, &list) == nil && len(list) > 0 {
				var parts []string
				for _, e := range list {
					parts = append(parts, strings.TrimSpace(e.Detail))
				}
				return strings.Join(parts, "; ")
			}
		}
		if raw, ok := m["message"]; ok {
			var s string
			if json.Unmarshal(raw, &s) == nil {
				return s
			}
		}
		for _, raw := range m {
			var inner struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			}
			if json.Unmarshal(raw, &inner) == nil && inner.Message != "" {
				msg := inner.Message
				if inner.Type != "" {
					msg = inner.Type + ": " + msg
				}
				return msg
			}
		}
	}
	return string(body)
}

func cleanMessage(s string) string {
	s = htmlTag.ReplaceAllString(s, " ")
	if i := strings.Index(s, "Failed validating"); i > 0 { // jsonschema's dump of the schema
		s = s[:i]
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 500 {
		s = s[:500] + "..."
	}
	return s
}

func decodeError(method, u string, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return &APIError{Method: method, URL: u, Status: resp.StatusCode, Message: ErrorMessage(b)}
}

// JoinURL joins an endpoint and a path, adding version unless the endpoint
// already ends with it (Neutron's catalog URL has no version, Nova's has
// /v2.1, Glance's may have either), with the query encoded.
func JoinURL(endpoint, version, path string, query url.Values) string {
	u := strings.TrimRight(endpoint, "/")
	if version != "" && !strings.HasSuffix(u, "/"+version) {
		u += "/" + version
	}
	u += "/" + strings.TrimLeft(path, "/")
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	return u
}

// service is how a service type's paths are built.
type service struct {
	typ, version string
	header       map[string]string
}

var (
	compute = service{typ: "compute", version: "v2.1", header: map[string]string{"OpenStack-API-Version": "compute 2.47"}}
	image   = service{typ: "image", version: "v2"}
	network = service{typ: "network", version: "v2.0"}
	// Placement's catalog URL is its root; 1.14 filters providers by name and tree.
	placement = service{typ: "placement", header: map[string]string{"OpenStack-API-Version": "placement 1.14"}}
)

// do sends a JSON request (body may be nil) to a service and decodes the
// JSON answer into out (may be nil). A 401 renews the token once.
func (c *Client) do(ctx context.Context, method string, svc service, path string, query url.Values, body, out any) error {
	var data []byte
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			return err
		}
	}
	return c.send(ctx, method, svc, path, query, "application/json", func() io.Reader { return bytes.NewReader(data) }, body != nil, out)
}

func (c *Client) send(ctx context.Context, method string, svc service, path string, query url.Values, contentType string, body func() io.Reader, hasBody bool, out any) error {
	ep, err := c.Endpoint(svc.typ)
	if err != nil {
		return err
	}
	u := JoinURL(ep, svc.version, path, query)
	for attempt := 0; ; attempt++ {
		tok, err := c.currentToken(ctx)
		if err != nil {
			return err
		}
		var rd io.Reader
		if hasBody {
			rd = body()
		}
		req, err := http.NewRequestWithContext(ctx, method, u, rd)
		if err != nil {
			return err
		}
		req.Header.Set("X-Auth-Token", tok)
		req.Header.Set("Accept", "application/json")
		if hasBody {
			req.Header.Set("Content-Type", contentType)
		}
		for k, v := range svc.header {
			req.Header.Set(k, v)
		}
		resp, err := c.HTTP.Do(req)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, u, err)
		}
		if resp.StatusCode == http.StatusUnauthorized && attempt == 0 {
			resp.Body.Close()
			c.mu.Lock()
			c.token = ""
			c.mu.Unlock()
			continue
		}
		defer resp.Body.Close()
		if resp.StatusCode >= 400 {
			return decodeError(method, u, resp)
		}
		if out == nil || resp.StatusCode == http.StatusNoContent {
			io.Copy(io.Discard, resp.Body)
			return nil
		}
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return fmt.Errorf("%s %s: decode answer: %w", method, u, err)
		}
		return nil
	}
}

func asAPIError(err error, target **APIError) bool { return errors.As(err, target) }
