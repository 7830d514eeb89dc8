package client

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/rest"
)

type echo struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

func endpoints() []rest.Endpoint {
	return []rest.Endpoint{
		{Path: "", Get: rest.Action{Handler: func(r *http.Request) rest.Response {
			return rest.SyncResponse(api.ServerInfo{Version: "9.9", State: api.StateRunning, StateDir: "/var/lib/osd",
				Uptime: "3s", Kubernetes: api.KubernetesStatus{NodeName: "n1", Reason: "apiserver starting"}})
		}}},
		{Path: "echo", Post: rest.Action{Handler: func(r *http.Request) rest.Response {
			var in echo
			if err := rest.DecodeJSON(r, &in, 1024); err != nil {
				return rest.ErrorResponse(err)
			}
			in.Count++
			return rest.SyncResponseStatus(http.StatusCreated, in)
		}}},
		{Path: "things/{name}", Get: rest.Action{Handler: func(r *http.Request) rest.Response {
			return rest.ErrorResponse(rest.Errorf(rest.ErrNotFound, "thing %q", rest.Var(r, "name")))
		}}, Delete: rest.Action{Handler: func(r *http.Request) rest.Response {
			return rest.ErrorResponse(rest.Errorf(rest.ErrConflict, "thing %q is in use", rest.Var(r, "name")))
		}}},
		{Path: "query", Get: rest.Action{Handler: func(r *http.Request) rest.Response {
			return rest.SyncResponse(r.URL.Query().Get("x"))
		}}},
		{Path: "op", Post: rest.Action{Handler: func(r *http.Request) rest.Response {
			return rest.AsyncResponse("/1.0/operations/42", map[string]string{"id": "42"})
		}}},
		{Path: "events", Get: rest.Action{Handler: func(r *http.Request) rest.Response {
			return rest.ManualResponse(func(w http.ResponseWriter) error {
				w.Header().Set("Content-Type", "application/x-ndjson")
				_, err := io.WriteString(w, "{\"n\":1}\n{\"n\":2}\n")
				return err
			})
		}}},
		{Path: "empty", Put: rest.Action{Handler: func(r *http.Request) rest.Response { return rest.EmptySyncResponse }}},
	}
}

// startDaemon serves the test endpoints on a real unix socket and returns its path.
func startDaemon(t *testing.T, h http.Handler) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "unix.socket")
	l, err := rest.ListenUnix(path)
	if err != nil {
		t.Fatalf("ListenUnix() = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rest.Serve(ctx, l, h) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve() = %v, want nil", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("Serve did not stop")
		}
	})
	return path
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	c := NewUnix(startDaemon(t, rest.NewRouter(endpoints())))

	start := time.Now()
	info, err := c.ServerInfo(ctx)
	if err != nil {
		t.Fatalf("ServerInfo() = %v, want nil", err)
	}
	t.Logf("first ServerInfo round trip over the unix socket: %v", time.Since(start))
	want := api.ServerInfo{Version: "9.9", State: api.StateRunning, StateDir: "/var/lib/osd", Uptime: "3s",
		Kubernetes: api.KubernetesStatus{NodeName: "n1", Reason: "apiserver starting"}}
	if info != want {
		t.Errorf("ServerInfo() = %+v, want %+v", info, want)
	}

	var out echo
	if err := c.Query(ctx, "POST", "echo", echo{Name: "a", Count: 1}, &out); err != nil || out != (echo{"a", 2}) {
		t.Errorf("Query(POST echo) = %+v, %v, want {a 2}, nil", out, err)
	}
	var q string
	if err := c.Query(ctx, "GET", "query?x=hello", nil, &q); err != nil || q != "hello" {
		t.Errorf("Query(GET query?x=hello) = %q, %v, want hello", q, err)
	}
	if err := c.Query(ctx, "PUT", "/1.0/empty", nil, nil); err != nil {
		t.Errorf("Query(PUT /1.0/empty) = %v, want nil", err)
	}
	env, err := c.Raw(ctx, "POST", "op", nil)
	if err != nil || env.Type != api.AsyncResponse || env.Operation != "/1.0/operations/42" || env.StatusCode != 202 {
		t.Errorf("Raw(POST op) = %+v, %v, want async /1.0/operations/42", env, err)
	}

	start = time.Now()
	const n = 200
	for i := 0; i < n; i++ {
		if _, err := c.ServerInfo(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d sequential ServerInfo round trips: %v (%v each)", n, time.Since(start), time.Since(start)/n)
}

func TestErrorEnvelopes(t *testing.T) {
	ctx := context.Background()
	c := NewUnix(startDaemon(t, rest.NewRouter(endpoints())))
	tests := []struct {
		name, method, path string
		body               any
		wantCode           int
		wantSentinel       error
		wantMsg            string
	}{
		{"handler not found", "GET", "things/x", nil, 404, rest.ErrNotFound, `thing "x"`},
		{"conflict", "DELETE", "things/x", nil, 409, rest.ErrConflict, `thing "x" is in use`},
		{"unknown path", "GET", "nowhere", nil, 404, rest.ErrNotFound, "no API endpoint at /1.0/nowhere"},
		{"wrong method", "PATCH", "echo", nil, 405, rest.ErrMethodNotAllowed, "method PATCH not allowed"},
		{"unknown field", "POST", "echo", map[string]any{"nope": 1}, 400, rest.ErrBadRequest, `unknown field "nope"`},
		{"malformed raw body", "POST", "echo", []byte(`{"name":`), 400, rest.ErrBadRequest, "unexpected end of input"},
		{"too large", "POST", "echo", echo{Name: strings.Repeat("x", 2000)}, 413, rest.ErrTooLarge, "larger than 1024 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.Query(ctx, tt.method, tt.path, tt.body, nil)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Query(%s %s) = %v (%T), want *Error", tt.method, tt.path, err, err)
			}
			if e.StatusCode != tt.wantCode || !strings.Contains(e.Message, tt.wantMsg) {
				t.Errorf("Query(%s %s) = %d %q, want %d containing %q", tt.method, tt.path, e.StatusCode, e.Message, tt.wantCode, tt.wantMsg)
			}
			if !errors.Is(err, tt.wantSentinel) {
				t.Errorf("errors.Is(Query(%s %s), %v) = false, want true", tt.method, tt.path, tt.wantSentinel)
			}
			if errors.Is(err, rest.ErrNotReady) {
				t.Errorf("errors.Is(Query(%s %s), ErrNotReady) = true, want false", tt.method, tt.path)
			}
		})
	}
}

func TestStream(t *testing.T) {
	ctx := context.Background()
	c := NewUnix(startDaemon(t, rest.NewRouter(endpoints())))
	rc, err := c.Stream(ctx, "GET", "events", nil)
	if err != nil {
		t.Fatalf("Stream(events) = %v", err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "{\"n\":1}\n{\"n\":2}\n" {
		t.Errorf("Stream(events) body = %q, want two events", b)
	}
	if _, err := c.Stream(ctx, "GET", "things/y", nil); !errors.Is(err, rest.ErrNotFound) {
		t.Errorf("Stream(things/y) = %v, want ErrNotFound", err)
	}
}

func TestNotAnEnvelope(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		io.WriteString(w, "<html>proxy error</html>")
	})
	c := NewUnix(startDaemon(t, h))
	_, err := c.ServerInfo(context.Background())
	if err == nil || !strings.Contains(err.Error(), "unexpected answer from the daemon: HTTP 502 text/html") {
		t.Errorf("ServerInfo() from a non-osd server = %v, want unexpected answer", err)
	}
}

func TestDaemonNotRunning(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.socket")
	stale := filepath.Join(dir, "stale.socket")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()

	tests := []struct {
		name, path, want string
	}{
		{"missing socket", missing, "osd daemon is not running (no socket at " + missing + "): start it with `osd daemon` or `systemctl start osd`"},
		{"stale socket", stale, "osd daemon is not running (stale socket at " + stale + ", nothing listens)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewUnix(tt.path).ServerInfo(context.Background())
			if !errors.Is(err, ErrDaemonNotRunning) {
				t.Fatalf("ServerInfo() = %v, want ErrDaemonNotRunning", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ServerInfo() = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestContextCancel(t *testing.T) {
	block := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	})
	c := NewUnix(startDaemon(t, h))
	defer close(block)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.ServerInfo(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ServerInfo(expiring ctx) = %v, want DeadlineExceeded", err)
	}
}

func TestURL(t *testing.T) {
	c := New("https://10.0.0.2:7443/", http.DefaultClient)
	tests := []struct{ in, want string }{
		{"", "https://10.0.0.2:7443/1.0"},
		{"status", "https://10.0.0.2:7443/1.0/status"},
		{"/status", "https://10.0.0.2:7443/1.0/status"},
		{"/1.0/status", "https://10.0.0.2:7443/1.0/status"},
		{"/1.0", "https://10.0.0.2:7443/1.0"},
		{"?recursion=1", "https://10.0.0.2:7443/1.0?recursion=1"},
		{"images/a?force=1", "https://10.0.0.2:7443/1.0/images/a?force=1"},
	}
	for _, tt := range tests {
		if got := c.URL(tt.in); got != tt.want {
			t.Errorf("URL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestErrorText(t *testing.T) {
	if got := (&Error{StatusCode: 503}).Error(); got != "osd daemon answered 503 Service Unavailable" {
		t.Errorf("Error{503}.Error() = %q", got)
	}
	if !errors.Is(&Error{StatusCode: 503}, rest.ErrNotReady) {
		t.Error("errors.Is(Error{503}, ErrNotReady) = false, want true")
	}
	if errors.Is(&Error{StatusCode: 500}, rest.ErrNotFound) {
		t.Error("errors.Is(Error{500}, ErrNotFound) = true, want false")
	}
}
