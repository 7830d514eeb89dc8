package rest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// ListenUnix listens on the unix socket at path, reachable by root only (mode 0600). It
// creates the parent directory (0755) if missing, refuses when another live server
// answers on path, and replaces a stale socket file. The socket gets its final mode
// before it appears at path, so no other user can ever connect to it.
func ListenUnix(path string) (net.Listener, error) {
	path, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create socket directory: %w", err)
	}
	if err := clearStale(path); err != nil {
		return nil, err
	}

	// Bind in a private directory, restrict, then hard-link into place: link fails if
	// path exists, so two daemons racing cannot both win.
	tmpDir, err := os.MkdirTemp(dir, ".osd-socket-")
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	defer os.RemoveAll(tmpDir)
	tmp := filepath.Join(tmpDir, "s")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	l.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("restrict socket %s: %w", path, err)
	}
	if err := os.Link(tmp, path); err != nil {
		l.Close()
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("another osd daemon is already listening on %s", path)
		}
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return &unixListener{UnixListener: l, path: path, file: st}, nil
}

// clearStale refuses a live socket at path and removes a dead one.
func clearStale(path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inspect socket %s: %w", path, err)
	}
	if st.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("%s exists and is not a socket; move it away", path)
	}
	conn, err := net.DialTimeout("unix", path, 2*time.Second)
	if err == nil {
		conn.Close()
		return fmt.Errorf("another osd daemon is already listening on %s", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("probe socket %s: %w", path, err)
	}
	slog.Info("removing stale socket", "path", path)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	return nil
}

// unixListener removes its socket file on Close, unless another server replaced it.
type unixListener struct {
	*net.UnixListener
	path string
	file os.FileInfo
	once sync.Once
	err  error
}

func (l *unixListener) Close() error {
	l.once.Do(func() {
		l.err = l.UnixListener.Close()
		if st, err := os.Stat(l.path); err == nil && os.SameFile(st, l.file) {
			_ = os.Remove(l.path)
		}
	})
	return l.err
}

// Server timeouts. There is no write timeout by default: event streams stay open for as
// long as the client watches.
const (
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 2 * time.Minute
	shutdownGrace     = 10 * time.Second
)

// ServeOption tunes the HTTP server Serve runs.
type ServeOption func(*http.Server)

// WithTimeouts bounds how long a request's body may take to arrive (read) and its answer
// to leave (write), for listeners that callers without credentials can reach.
func WithTimeouts(read, write time.Duration) ServeOption {
	return func(s *http.Server) { s.ReadTimeout, s.WriteTimeout = read, write }
}

// WithConnState installs f as the server's connection state hook (see http.Server).
func WithConnState(f func(net.Conn, http.ConnState)) ServeOption {
	return func(s *http.Server) { s.ConnState = f }
}

// WithMaxHeaderBytes bounds the request headers (default 1 MiB).
func WithMaxHeaderBytes(n int) ServeOption {
	return func(s *http.Server) { s.MaxHeaderBytes = n }
}

type stoppingKey struct{}

// Stopping returns a channel closed when the server handling the request (whose context
// is ctx) begins to shut down. Streaming handlers select on it to end promptly; ordinary
// requests are left to finish. It returns nil (never ready) outside Serve.
func Stopping(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(stoppingKey{}).(<-chan struct{})
	return ch
}

// Serve serves h on l until ctx ends, then shuts down gracefully: it closes Stopping for
// streams, lets in-flight requests finish for a grace period, then closes connections.
// Request contexts keep ctx's values but are not cancelled by it. It returns nil after a
// clean shutdown.
func Serve(ctx context.Context, l net.Listener, h http.Handler, opts ...ServeOption) error {
	stopping := make(chan struct{})
	base := context.WithValue(context.WithoutCancel(ctx), stoppingKey{}, (<-chan struct{})(stopping))
	srv := &http.Server{
		Handler:           h,
		BaseContext:       func(net.Listener) context.Context { return base },
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn),
	}
	for _, o := range opts {
		o(srv)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", l.Addr(), err)
	case <-ctx.Done():
	}
	close(stopping)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", l.Addr(), err)
	}
	return nil
}
