package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/osdcloud/osd/daemon/api"
)

type thing struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

func testEndpoints() []Endpoint {
	return []Endpoint{
		{Path: "", Get: Action{Handler: func(r *http.Request) Response {
			return SyncResponse(api.ServerInfo{Version: "test", State: api.StateRunning})
		}}},
		{Path: "things/{name}",
			Get: Action{Handler: func(r *http.Request) Response {
				name := Var(r, "name")
				if name == "missing" {
					return ErrorResponse(Errorf(ErrNotFound, "thing %q", name))
				}
				return SyncResponse(thing{Name: name})
			}},
			Post: Action{Handler: func(r *http.Request) Response {
				var in thing
				if err := DecodeJSON(r, &in, 64); err != nil {
					return ErrorResponse(err)
				}
				return SyncResponseStatus(http.StatusCreated, in)
			}},
		},
		{Path: "panic", Get: Action{Handler: func(r *http.Request) Response { panic("kaboom") }}},
		{Path: "nil", Get: Action{Handler: func(r *http.Request) Response { return nil }}},
		{Path: "internal", Get: Action{Handler: func(r *http.Request) Response {
			return ErrorResponse(errors.New("open /var/lib/osd/x: permission denied"))
		}}},
		{Path: "unencodable", Get: Action{Handler: func(r *http.Request) Response {
			return SyncResponse(map[string]any{"c": make(chan int)})
		}}},
		{Path: "async", Post: Action{Handler: func(r *http.Request) Response {
			return AsyncResponse("/1.0/operations/abc", map[string]string{"id": "abc"})
		}}},
		{Path: "stream", Get: Action{Handler: func(r *http.Request) Response {
			return ManualResponse(func(w http.ResponseWriter) error {
				w.Header().Set("Content-Type", "text/plain")
				_, err := w.Write([]byte("line1\nline2\n"))
				return err
			})
		}}},
	}
}

// do sends one request through a router and decodes the envelope.
func do(t *testing.T, h http.Handler, method, path, contentType, body string) (*httptest.ResponseRecorder, api.Response) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var env api.Response
	if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
			t.Fatalf("%s %s: body %q is not an envelope: %v", method, path, rec.Body.String(), err)
		}
	}
	return rec, env
}

func TestRouterEnvelopes(t *testing.T) {
	h := NewRouter(testEndpoints())
	tests := []struct {
		name, method, path string
		wantCode           int
		wantType           api.ResponseType
		wantErr            string // substring of the error text
		wantMeta           string
	}{
		{"root", "GET", "/1.0", 200, api.SyncResponse, "", `"version":"test"`},
		{"var", "GET", "/1.0/things/abc", 200, api.SyncResponse, "", `{"name":"abc","count":0}`},
		{"escaped var", "GET", "/1.0/things/a%2Fb", 200, api.SyncResponse, "", `{"name":"a/b","count":0}`},
		{"handler not found", "GET", "/1.0/things/missing", 404, api.ErrorResponse, `thing "missing"`, ""},
		{"unknown path", "GET", "/1.0/nowhere", 404, api.ErrorResponse, "no API endpoint at /1.0/nowhere", ""},
		{"unknown version", "GET", "/2.0", 404, api.ErrorResponse, "no API endpoint", ""},
		{"wrong method", "DELETE", "/1.0/things/abc", 405, api.ErrorResponse, "method DELETE not allowed", ""},
		{"panic", "GET", "/1.0/panic", 500, api.ErrorResponse, "kaboom", ""},
		{"nil response", "GET", "/1.0/nil", 500, api.ErrorResponse, "no response", ""},
		{"internal error text", "GET", "/1.0/internal", 500, api.ErrorResponse, "permission denied", ""},
		{"unencodable metadata", "GET", "/1.0/unencodable", 500, api.ErrorResponse, "encode response metadata", ""},
		{"created", "POST", "/1.0/things/x", 201, api.SyncResponse, "", `{"name":"n","count":2}`},
		{"async", "POST", "/1.0/async", 202, api.AsyncResponse, "", `{"id":"abc"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := ""
			if tt.method == "POST" {
				body = `{"name":"n","count":2}`
			}
			rec, env := do(t, h, tt.method, tt.path, "application/json", body)
			if rec.Code != tt.wantCode || env.StatusCode != tt.wantCode || env.Type != tt.wantType {
				t.Fatalf("%s %s = %d %+v, want %d type %s", tt.method, tt.path, rec.Code, env, tt.wantCode, tt.wantType)
			}
			if env.Status != http.StatusText(tt.wantCode) {
				t.Errorf("%s %s status = %q, want %q", tt.method, tt.path, env.Status, http.StatusText(tt.wantCode))
			}
			if tt.wantType == api.ErrorResponse {
				if env.ErrorCode != tt.wantCode || !strings.Contains(env.Error, tt.wantErr) || env.Metadata != nil {
					t.Errorf("%s %s error = %d %q meta %s, want %d containing %q and no metadata", tt.method, tt.path, env.ErrorCode, env.Error, env.Metadata, tt.wantCode, tt.wantErr)
				}
			} else if string(env.Metadata) != tt.wantMeta && !strings.Contains(string(env.Metadata), tt.wantMeta) {
				t.Errorf("%s %s metadata = %s, want %s", tt.method, tt.path, env.Metadata, tt.wantMeta)
			}
		})
	}
}

func TestRouterSyncShape(t *testing.T) {
	h := NewRouter(testEndpoints())
	rec, _ := do(t, h, "GET", "/1.0/things/abc", "", "")
	want := `{"type":"sync","status":"OK","status_code":200,"metadata":{"name":"abc","count":0}}` + "\n"
	if rec.Body.String() != want {
		t.Errorf("GET /1.0/things/abc body = %s, want %s", rec.Body.String(), want)
	}
	rec, _ = do(t, h, "GET", "/1.0/nowhere", "", "")
	want = `{"type":"error","status":"Not Found","status_code":404,"error_code":404,"error":"no API endpoint at /1.0/nowhere"}` + "\n"
	if rec.Body.String() != want {
		t.Errorf("GET /1.0/nowhere body = %s, want %s", rec.Body.String(), want)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
}

func TestMethodNotAllowedAllowHeader(t *testing.T) {
	h := NewRouter(testEndpoints())
	rec, _ := do(t, h, "PUT", "/1.0/things/abc", "", "")
	if got := rec.Header().Get("Allow"); got != "GET, POST" {
		t.Errorf("Allow = %q, want %q", got, "GET, POST")
	}
}

func TestAsyncLocation(t *testing.T) {
	rec, env := do(t, NewRouter(testEndpoints()), "POST", "/1.0/async", "", "")
	if rec.Header().Get("Location") != "/1.0/operations/abc" || env.Operation != "/1.0/operations/abc" {
		t.Errorf("async Location, operation = %q, %q, want /1.0/operations/abc", rec.Header().Get("Location"), env.Operation)
	}
}

func TestManualResponse(t *testing.T) {
	rec, _ := do(t, NewRouter(testEndpoints()), "GET", "/1.0/stream", "", "")
	if rec.Code != 200 || rec.Body.String() != "line1\nline2\n" || rec.Header().Get("Content-Type") != "text/plain" {
		t.Errorf("GET /1.0/stream = %d %q %q, want 200 text/plain two lines", rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
	}
}

func TestPanicLoggedOnce(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := NewRouter(testEndpoints(), WithLogger(logger))
	do(t, h, "GET", "/1.0/panic", "", "")
	if n := strings.Count(buf.String(), "panic in API handler"); n != 1 {
		t.Errorf("panic log lines = %d, want 1; log:\n%s", n, buf.String())
	}
	if !strings.Contains(buf.String(), "level=DEBUG msg=\"API request\" method=GET path=/1.0/panic status=500") {
		t.Errorf("request log = %s, want a debug line with status 500", buf.String())
	}
}

func TestHiddenInternalErrors(t *testing.T) {
	var buf bytes.Buffer
	h := NewRouter(testEndpoints(), WithHiddenInternalErrors(), WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	_, env := do(t, h, "GET", "/1.0/internal", "", "")
	if env.StatusCode != 500 || strings.Contains(env.Error, "permission denied") {
		t.Errorf("hidden 500 error = %q, want no internal detail", env.Error)
	}
	if !strings.Contains(buf.String(), "permission denied") {
		t.Errorf("log = %q, want the internal detail logged", buf.String())
	}
	_, env = do(t, h, "GET", "/1.0/things/missing", "", "")
	if env.StatusCode != 404 || !strings.Contains(env.Error, "missing") {
		t.Errorf("hidden-mode 404 error = %q, want the message kept", env.Error)
	}
}

func TestAuthorizer(t *testing.T) {
	trusted := func(r *http.Request) bool { return r.Header.Get("X-Test-Trusted") == "yes" }
	tests := []struct {
		name     string
		auth     Authorizer
		path     string
		trusted  bool
		wantCode int
	}{
		{"default allows", nil, "/1.0/things/a", false, 200},
		{"untrusted refused", func(r *http.Request, route Route) error {
			if route.Path == "" || trusted(r) {
				return nil
			}
			return Errorf(ErrForbidden, "not trusted")
		}, "/1.0/things/a", false, 403},
		{"open route", func(r *http.Request, route Route) error {
			if route.Path == "" || trusted(r) {
				return nil
			}
			return Errorf(ErrForbidden, "not trusted")
		}, "/1.0", false, 200},
		{"trusted passes", func(r *http.Request, route Route) error {
			if route.Path == "" || trusted(r) {
				return nil
			}
			return Errorf(ErrForbidden, "not trusted")
		}, "/1.0/things/a", true, 200},
		{"unauthorized kept", func(r *http.Request, route Route) error {
			return Errorf(ErrUnauthorized, "no client certificate")
		}, "/1.0/things/a", false, 401},
		{"plain error becomes forbidden", func(r *http.Request, route Route) error {
			return errors.New("certificate revoked")
		}, "/1.0/things/a", false, 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []Option
			if tt.auth != nil {
				opts = append(opts, WithAuthorizer(tt.auth))
			}
			req := httptest.NewRequest("GET", tt.path, nil)
			if tt.trusted {
				req.Header.Set("X-Test-Trusted", "yes")
			}
			rec := httptest.NewRecorder()
			NewRouter(testEndpoints(), opts...).ServeHTTP(rec, req)
			if rec.Code != tt.wantCode {
				t.Errorf("GET %s = %d (%s), want %d", tt.path, rec.Code, rec.Body.String(), tt.wantCode)
			}
		})
	}
}
