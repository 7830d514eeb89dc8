package rest

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/gorilla/mux"
)

// APIPrefix is where every endpoint lives.
const APIPrefix = "/1.0"

// Endpoint is one resource: its path under /1.0 ("" for /1.0 itself, "status",
// "images/{name}") and the action for each method it supports.
type Endpoint struct {
	Path   string
	Get    Action
	Put    Action
	Post   Action
	Patch  Action
	Delete Action
}

// Action handles one method of an endpoint. Who may call it is not the action's business:
// the router's Authorizer decides by Route (over HTTPS, from one table of every route).
type Action struct {
	Handler func(r *http.Request) Response
}

// Route names one action: its HTTP method and its endpoint's path template under /1.0
// ("cluster/members/{name}", "" for /1.0 itself).
type Route struct {
	Method string
	Path   string
}

// String is "METHOD /1.0/path".
func (r Route) String() string {
	p := APIPrefix
	if t := strings.Trim(r.Path, "/"); t != "" {
		p += "/" + t
	}
	return r.Method + " " + p
}

// Routes lists every action endpoints register.
func Routes(endpoints []Endpoint) []Route {
	var out []Route
	for _, ep := range endpoints {
		h := endpointHandler{ep: ep}
		for _, m := range h.allowed() {
			out = append(out, Route{Method: m, Path: strings.Trim(ep.Path, "/")})
		}
	}
	return out
}

// Authorizer decides whether r may run the action at route. Return an error wrapping
// ErrUnauthorized or ErrForbidden to refuse.
type Authorizer func(r *http.Request, route Route) error

// Option configures NewRouter.
type Option func(*routerConfig)

type routerConfig struct {
	authorize    Authorizer
	logger       *slog.Logger
	hideInternal bool
}

// WithAuthorizer installs the trust check run before every action. The default allows
// everything: the unix socket is root-only.
func WithAuthorizer(a Authorizer) Option {
	return func(c *routerConfig) { c.authorize = a }
}

// WithLogger sets the logger for request and panic logs (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(c *routerConfig) { c.logger = l }
}

// WithHiddenInternalErrors answers 500s with a generic message (the details are logged),
// for listeners reachable by other machines.
func WithHiddenInternalErrors() Option {
	return func(c *routerConfig) { c.hideInternal = true }
}

// Var returns the path variable name of the request ("images/{name}" -> Var(r, "name")).
func Var(r *http.Request, name string) string {
	v := mux.Vars(r)[name]
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}

// NewRouter registers every endpoint under /1.0 and answers unknown paths (404),
// unsupported methods (405 with Allow) and handler panics (500) with error envelopes.
func NewRouter(endpoints []Endpoint, opts ...Option) *mux.Router {
	cfg := routerConfig{logger: slog.Default()}
	for _, o := range opts {
		o(&cfg)
	}
	r := mux.NewRouter()
	r.UseEncodedPath()
	for _, ep := range endpoints {
		path := APIPrefix
		if p := strings.Trim(ep.Path, "/"); p != "" {
			path += "/" + p
		}
		r.Handle(path, &endpointHandler{cfg: &cfg, ep: ep})
	}
	notFound := &endpointHandler{cfg: &cfg, notFound: true}
	r.NotFoundHandler = notFound
	r.MethodNotAllowedHandler = notFound // not reached: methods are dispatched per endpoint
	return r
}

type endpointHandler struct {
	cfg      *routerConfig
	ep       Endpoint
	notFound bool
}

func (h *endpointHandler) actions() map[string]Action {
	return map[string]Action{
		http.MethodGet:    h.ep.Get,
		http.MethodPut:    h.ep.Put,
		http.MethodPost:   h.ep.Post,
		http.MethodPatch:  h.ep.Patch,
		http.MethodDelete: h.ep.Delete,
	}
}

func (h *endpointHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &recorder{ResponseWriter: w}
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			h.cfg.logger.Error("panic in API handler", "method", r.Method, "path", r.URL.Path,
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if !rec.wroteHeader {
				h.render(rec, r, ErrorResponse(fmt.Errorf("internal error: handler panicked: %v", v)))
			}
		}
		h.cfg.logger.Debug("API request", "method", r.Method, "path", r.URL.Path,
			"status", rec.status(), "duration", time.Since(start))
	}()
	h.render(rec, r, h.dispatch(rec, r))
}

func (h *endpointHandler) dispatch(w http.ResponseWriter, r *http.Request) Response {
	if h.notFound {
		return ErrorResponse(Errorf(ErrNotFound, "no API endpoint at %s", r.URL.Path))
	}
	action := h.actions()[r.Method]
	if action.Handler == nil {
		allow := h.allowed()
		w.Header().Set("Allow", strings.Join(allow, ", "))
		return ErrorResponse(Errorf(ErrMethodNotAllowed, "method %s not allowed on %s (allowed: %s)",
			r.Method, r.URL.Path, strings.Join(allow, ", ")))
	}
	if h.cfg.authorize != nil {
		if err := h.cfg.authorize(r, Route{Method: r.Method, Path: strings.Trim(h.ep.Path, "/")}); err != nil {
			if StatusFor(err) == http.StatusInternalServerError {
				err = fmt.Errorf("%w: %w", ErrForbidden, err)
			}
			return ErrorResponse(err)
		}
	}
	resp := action.Handler(r)
	if resp == nil {
		return ErrorResponse(errors.New("internal error: handler returned no response"))
	}
	return resp
}

func (h *endpointHandler) allowed() []string {
	var out []string
	for m, a := range h.actions() {
		if a.Handler != nil {
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out
}

// render writes resp; if it fails before writing anything, it answers 500 instead.
func (h *endpointHandler) render(w *recorder, r *http.Request, resp Response) {
	if e, ok := resp.(*envelopeResponse); ok && h.cfg.hideInternal && e.env.StatusCode == http.StatusInternalServerError {
		h.cfg.logger.Error("API internal error", "method", r.Method, "path", r.URL.Path, "error", e.env.Error)
		resp = ErrorResponse(errors.New("internal error (details in the daemon log)"))
	}
	err := resp.Render(w, r)
	if err == nil {
		return
	}
	if w.wroteHeader {
		h.cfg.logger.Warn("API response failed mid-write", "method", r.Method, "path", r.URL.Path, "error", err)
		return
	}
	if e := ErrorResponse(err).Render(w, r); e != nil {
		h.cfg.logger.Error("API error response failed", "error", e)
	}
}

// recorder remembers whether and what status was written, for logging and fallbacks.
type recorder struct {
	http.ResponseWriter
	wroteHeader bool
	code        int
}

func (r *recorder) WriteHeader(code int) {
	if !r.wroteHeader {
		r.wroteHeader, r.code = true, code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if !r.wroteHeader {
		r.WriteHeader(http.StatusOK)
	}
	return r.ResponseWriter.Write(b)
}

func (r *recorder) status() int {
	if !r.wroteHeader {
		return http.StatusOK
	}
	return r.code
}

// Unwrap lets http.ResponseController reach Flush, Hijack and deadlines for streams.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Flush forwards to the underlying writer so streams can use w.(http.Flusher).
func (r *recorder) Flush() {
	if !r.wroteHeader {
		r.WriteHeader(http.StatusOK)
	}
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
