package rest

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func unixClient(path string) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}
}

// serve starts Serve on a fresh socket and returns the socket path and a stop function
// that waits for Serve to return.
func serve(t *testing.T, path string) (stop func() error) {
	t.Helper()
	l, err := ListenUnix(path)
	if err != nil {
		t.Fatalf("ListenUnix(%s) = %v, want nil", path, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, NewRouter(testEndpoints())) }()
	var once bool
	var result error
	stop = func() error {
		if !once {
			once = true
			cancel()
			select {
			case result = <-done:
			case <-time.After(15 * time.Second):
				t.Error("Serve did not return after cancel")
			}
		}
		return result
	}
	t.Cleanup(func() { stop() })
	return stop
}

func TestUnixSocketServe(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run", "osd")
	path := filepath.Join(dir, "unix.socket")
	stop := serve(t, path)

	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Type() != os.ModeSocket || st.Mode().Perm() != 0o600 {
		t.Errorf("socket mode = %v, want socket 0600", st.Mode())
	}
	dst, _ := os.Stat(dir)
	if dst.Mode().Perm() != 0o755 {
		t.Errorf("created socket dir mode = %v, want 0755", dst.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("socket dir entries = %v, want only the socket (temporary bind dir removed)", entries)
	}

	resp, err := unixClient(path).Get("http://osd/1.0/things/abc")
	if err != nil {
		t.Fatalf("GET over socket = %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"name":"abc"`) {
		t.Errorf("GET over socket = %d %s, want 200 with abc", resp.StatusCode, body)
	}

	if err := stop(); err != nil {
		t.Errorf("Serve() after cancel = %v, want nil", err)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("socket after shutdown: stat = %v, want removed", err)
	}
}

func TestListenUnixRefusesLiveSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "unix.socket")
	serve(t, path)
	l, err := ListenUnix(path)
	if err == nil {
		l.Close()
		t.Fatal("second ListenUnix on a live socket = nil, want refusal")
	}
	want := "another osd daemon is already listening on " + path
	if err.Error() != want {
		t.Errorf("second ListenUnix = %q, want %q", err, want)
	}
	// The live server still answers: the refused attempt did not remove its socket.
	resp, err := unixClient(path).Get("http://osd/1.0")
	if err != nil {
		t.Fatalf("GET after refused ListenUnix = %v, want the first server to answer", err)
	}
	resp.Body.Close()
}

func TestListenUnixReplacesStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "unix.socket")
	// A server that died without cleaning up leaves its socket file behind.
	old, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	old.SetUnlinkOnClose(false)
	old.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("stale socket missing: %v", err)
	}
	serve(t, path)
	resp, err := unixClient(path).Get("http://osd/1.0")
	if err != nil {
		t.Fatalf("GET on replaced socket = %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET on replaced socket = %d, want 200", resp.StatusCode)
	}
}

func TestListenUnixRefusesNonSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "unix.socket")
	if err := os.WriteFile(path, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	if l, err := ListenUnix(path); err == nil || !strings.Contains(err.Error(), "not a socket") {
		if l != nil {
			l.Close()
		}
		t.Errorf("ListenUnix(regular file) = %v, want not a socket", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "keep me" {
		t.Errorf("regular file content = %q, want untouched", b)
	}
}

func TestCloseKeepsSuccessorSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "unix.socket")
	l1, err := ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	// Someone replaced the socket (e.g. an operator removed it and a new daemon started).
	os.Remove(path)
	l2, err := ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	l1.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Errorf("after closing the old listener, stat(successor socket) = %v, want it kept", err)
	}
}

// A stream that watches Stopping ends as soon as the server stops, so Serve returns
// without waiting for the grace period; an ordinary in-flight request still completes.
func TestServeEndsStreamsAndDrainsRequests(t *testing.T) {
	path := filepath.Join(t.TempDir(), "unix.socket")
	l, err := ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	streaming := make(chan struct{})
	slowStarted := make(chan struct{})
	h := NewRouter([]Endpoint{
		{Path: "events", Get: Action{Handler: func(r *http.Request) Response {
			return ManualResponse(func(w http.ResponseWriter) error {
				w.WriteHeader(200)
				w.(http.Flusher).Flush()
				close(streaming)
				select {
				case <-Stopping(r.Context()):
				case <-r.Context().Done():
				}
				_, err := io.WriteString(w, "bye\n")
				return err
			})
		}}},
		{Path: "slow", Get: Action{Handler: func(r *http.Request) Response {
			close(slowStarted)
			time.Sleep(300 * time.Millisecond)
			return SyncResponse("done")
		}}},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, h) }()
	wait := sync.OnceValue(func() error { return <-done })
	t.Cleanup(func() { cancel(); wait() })

	c := unixClient(path)
	stream, err := c.Get("http://osd/1.0/events")
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	<-streaming
	slow := make(chan string, 1)
	go func() {
		resp, err := c.Get("http://osd/1.0/slow")
		if err != nil {
			slow <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		slow <- string(b)
	}()
	<-slowStarted

	start := time.Now()
	cancel()
	served := make(chan error, 1)
	go func() { served <- wait() }()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve() = %v, want nil", err)
		}
	case <-time.After(shutdownGrace / 2):
		t.Fatal("Serve still running: the stream did not end on Stopping")
	}
	t.Logf("shutdown with an open stream took %v", time.Since(start))
	if b, _ := io.ReadAll(stream.Body); string(b) != "bye\n" {
		t.Errorf("stream tail = %q, want bye", b)
	}
	if got := <-slow; !strings.Contains(got, `"metadata":"done"`) {
		t.Errorf("in-flight request during shutdown = %q, want it completed", got)
	}
}
