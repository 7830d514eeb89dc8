package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/api"
)

// dialFrom opens a TCP connection to addr from the loopback address src.
func dialFrom(t testing.TB, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, src, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedSoon reports whether the server closes c within d.
func closedSoon(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// TestGuardSlowLoris holds hundreds of connections open from one address the way a
// slow-loris attack does (never finishing the TLS handshake; finishing it and then
// trickling a request's headers): the guard keeps what that address holds within its
// limits, closes the rest at once, and a real join from another address goes through.
func TestGuardSlowLoris(t *testing.T) {
	limits := DefaultGuardLimits
	limits.HandshakeTimeout = 3 * time.Second
	tc := startClusterWith(t, limits)
	const attacker = "127.0.0.2"

	// 1. Connections that never start their handshake.
	silent := make([]net.Conn, 0, 200)
	for range 200 {
		silent = append(silent, dialFrom(t, attacker, tc.addr))
	}
	// 2. Connections that finish the handshake (no client certificate) and then send
	//    a request line and one header byte at a time.
	var trickling []*tls.Conn
	for i := range 60 {
		raw := dialFrom(t, attacker, tc.addr)
		tlsc := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
		if err := tlsc.Handshake(); err != nil {
			continue // refused: over the limit
		}
		fmt.Fprintf(tlsc, "POST /1.0/cluster/join HTTP/1.1\r\nHost: x\r\nX-Slow-%d: ", i)
		trickling = append(trickling, tlsc)
	}
	time.Sleep(200 * time.Millisecond)
	hs, anon := tc.guard.Load()
	if hs > limits.MaxHandshakesPerSource || anon > limits.MaxAnonymousPerSource {
		t.Errorf("guard load from one address = %d handshakes, %d anonymous, want at most %d and %d",
			hs, anon, limits.MaxHandshakesPerSource, limits.MaxAnonymousPerSource)
	}
	if len(trickling) > limits.MaxAnonymousPerSource {
		t.Errorf("%d handshaken anonymous connections from one address were kept, want at most %d", len(trickling), limits.MaxAnonymousPerSource)
	}
	closed := 0
	for _, c := range silent[len(silent)-50:] {
		if closedSoon(c, 500*time.Millisecond) {
			closed++
		}
	}
	if closed < 40 {
		t.Errorf("%d of the last 50 silent connections were closed at once, want (nearly) all: they are over the limit", closed)
	}

	// A real join from another address, while the attack holds its connections.
	start := time.Now()
	id := tc.join(t, "node2", t.TempDir(), "compute")
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("join during the attack took %s, want it unhindered", took)
	}
	if id == nil {
		t.Fatal("no member identity")
	}

	// Silent connections are dropped when their handshake time runs out.
	time.Sleep(limits.HandshakeTimeout + time.Second)
	if hs, _ := tc.guard.Load(); hs != 0 {
		t.Errorf("handshakes in progress after the timeout = %d, want 0", hs)
	}
}

// TestAnonymousRateLimit: one address gets a burst of open-route requests, then 429.
func TestAnonymousRateLimit(t *testing.T) {
	limits := DefaultGuardLimits
	limits.AnonymousRequestsPerSec, limits.AnonymousBurst = 0.1, 5
	tc := startClusterWith(t, limits)
	ctx := context.Background()
	c := tc.client(t, nil)
	req := api.JoinRequest{Name: "node2", Secret: "x", Address: "127.0.0.1:1", CSR: mustCSR(t, "node2")}
	codes := map[int]int{}
	for range 8 {
		codes[statusOf(c.Query(ctx, http.MethodPost, "cluster/join", req, nil))]++
	}
	if codes[http.StatusUnauthorized] != 5 || codes[http.StatusTooManyRequests] != 3 {
		t.Errorf("8 join attempts answered %v, want 5 x 401 then 3 x 429", codes)
	}
	// Operators are not limited.
	admin := tc.client(t, tc.trustedClient(t, "admin"))
	for i := range 10 {
		if err := admin.Query(ctx, http.MethodGet, "cluster/tokens", nil, nil); err != nil {
			t.Fatalf("operator request %d = %v, want nil", i, err)
		}
	}
}

func TestRateLimiter(t *testing.T) {
	now := time.Unix(0, 0)
	l := newRateLimiter(1, 3)
	l.now = func() time.Time { return now }
	var got []bool
	for range 5 {
		got = append(got, l.allow("a"))
	}
	if fmt.Sprint(got) != "[true true true false false]" {
		t.Errorf("burst of 5 = %v, want 3 allowed", got)
	}
	if !l.allow("b") {
		t.Error("another source is limited too, want its own bucket")
	}
	now = now.Add(2 * time.Second)
	if !l.allow("a") || !l.allow("a") || l.allow("a") {
		t.Error("after 2 s at 1/s, want 2 more allowed")
	}
}
