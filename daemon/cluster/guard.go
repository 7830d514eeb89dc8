package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// GuardLimits bound what callers without a trusted certificate can hold of the HTTPS
// API, which must stay reachable for joins by anyone: connections still in their TLS
// handshake, and handshaken connections whose client presented no trusted certificate.
// Each bound holds per source address and in total; connections over a bound are closed
// at once. Callers with a trusted certificate (operators, members) are not counted.
type GuardLimits struct {
	HandshakeTimeout        time.Duration // a handshake not done by then is dropped
	MaxHandshakes           int           // connections in their handshake, in total
	MaxHandshakesPerSource  int           // ... from one address
	MaxAnonymous            int           // handshaken connections without trusted certificate, in total
	MaxAnonymousPerSource   int           // ... from one address
	AnonymousRequestsPerSec float64       // open-route requests per address, sustained
	AnonymousBurst          int           // ... in a burst
}

// DefaultGuardLimits are the HTTPS API's limits.
var DefaultGuardLimits = GuardLimits{
	HandshakeTimeout:        10 * time.Second,
	MaxHandshakes:           512,
	MaxHandshakesPerSource:  16,
	MaxAnonymous:            512,
	MaxAnonymousPerSource:   16,
	AnonymousRequestsPerSec: 1,
	AnonymousBurst:          20,
}

// Guard is the HTTPS API's listener: it does the TLS handshake itself, in the background
// and under a deadline (so a client that never finishes one holds nothing but a counted
// slot), and hands the server only handshaken connections within GuardLimits. Use
// ConnState as the server's connection state hook, so closed connections free their slot.
type Guard struct {
	inner  net.Listener
	tls    *tls.Config
	trust  *TrustSet
	limits GuardLimits

	ready  chan net.Conn
	closed chan struct{}
	once   sync.Once

	mu         sync.Mutex
	handshakes counter
	anonymous  counter
	anonConns  map[net.Conn]string // handshaken anonymous connection -> its source
}

// counter counts per source address and in total.
type counter struct {
	total  int
	per    map[string]int
	limit  int
	perMax int
}

func (c *counter) take(src string) bool {
	if c.total >= c.limit || c.per[src] >= c.perMax {
		return false
	}
	if c.per == nil {
		c.per = map[string]int{}
	}
	c.total++
	c.per[src]++
	return true
}

func (c *counter) release(src string) {
	c.total--
	if c.per[src]--; c.per[src] <= 0 {
		delete(c.per, src)
	}
}

// NewGuard wraps inner (a TCP listener) with TLS cfg and limits; trust tells which
// client certificates are trusted.
func NewGuard(inner net.Listener, cfg *tls.Config, trust *TrustSet, limits GuardLimits) *Guard {
	g := &Guard{inner: inner, tls: cfg, trust: trust, limits: limits,
		ready: make(chan net.Conn), closed: make(chan struct{}), anonConns: map[net.Conn]string{}}
	g.handshakes.limit, g.handshakes.perMax = limits.MaxHandshakes, limits.MaxHandshakesPerSource
	g.anonymous.limit, g.anonymous.perMax = limits.MaxAnonymous, limits.MaxAnonymousPerSource
	go g.acceptLoop()
	return g
}

func source(c net.Conn) string {
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}

func (g *Guard) acceptLoop() {
	for {
		c, err := g.inner.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			g.Close()
			return
		}
		src := source(c)
		g.mu.Lock()
		ok := g.handshakes.take(src)
		g.mu.Unlock()
		if !ok {
			c.Close()
			continue
		}
		go g.handshake(c, src)
	}
}

// handshake runs the TLS handshake of c and passes it on if it fits the limits.
func (g *Guard) handshake(c net.Conn, src string) {
	tc := tls.Server(c, g.tls)
	ctx, cancel := context.WithTimeout(context.Background(), g.limits.HandshakeTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	g.mu.Lock()
	g.handshakes.release(src)
	ok := err == nil
	if ok && !g.trusted(tc) {
		if ok = g.anonymous.take(src); ok {
			g.anonConns[tc] = src
		}
	}
	g.mu.Unlock()
	if !ok {
		tc.Close()
		return
	}
	select {
	case g.ready <- tc:
	case <-g.closed:
		g.forget(tc)
		tc.Close()
	}
}

// trusted reports whether the client of c presented a certificate the trust set knows.
func (g *Guard) trusted(c *tls.Conn) bool {
	peers := c.ConnectionState().PeerCertificates
	if len(peers) == 0 || g.trust == nil {
		return false
	}
	return g.trust.Identify(peers[0], time.Now()).Role != RoleAnyone
}

func (g *Guard) forget(c net.Conn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if src, ok := g.anonConns[c]; ok {
		delete(g.anonConns, c)
		g.anonymous.release(src)
	}
}

// ConnState is the server's connection state hook: a closed or hijacked connection
// frees its slot.
func (g *Guard) ConnState(c net.Conn, st http.ConnState) {
	if st == http.StateClosed || st == http.StateHijacked {
		g.forget(c)
	}
}

// Accept returns the next handshaken connection.
func (g *Guard) Accept() (net.Conn, error) {
	select {
	case c := <-g.ready:
		return c, nil
	case <-g.closed:
		return nil, net.ErrClosed
	}
}

// Close stops accepting; connections already handed out stay open.
func (g *Guard) Close() error {
	var err error
	g.once.Do(func() {
		close(g.closed)
		err = g.inner.Close()
	})
	return err
}

// Addr is the address listened on.
func (g *Guard) Addr() net.Addr { return g.inner.Addr() }

// Load reports how many connections are in their handshake and how many handshaken ones
// hold no trusted certificate (for tests and status).
func (g *Guard) Load() (handshakes, anonymous int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.handshakes.total, g.anonymous.total
}

// rateLimiter is a token bucket per source address for requests on open routes.
type rateLimiter struct {
	rate  float64
	burst float64
	mu    sync.Mutex
	seen  map[string]*bucket
	now   func() time.Time
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newRateLimiter(perSec float64, burst int) *rateLimiter {
	return &rateLimiter{rate: perSec, burst: float64(burst), seen: map[string]*bucket{}, now: time.Now}
}

// allow takes one token of src's bucket, if it has one.
func (l *rateLimiter) allow(src string) bool {
	if l == nil || l.rate <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.seen[src]
	if b == nil {
		if len(l.seen) > 4096 {
			l.prune(now)
		}
		b = &bucket{tokens: l.burst, last: now}
		l.seen[src] = b
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// prune forgets buckets that have filled up again.
func (l *rateLimiter) prune(now time.Time) {
	for src, b := range l.seen {
		if b.tokens+now.Sub(b.last).Seconds()*l.rate >= l.burst {
			delete(l.seen, src)
		}
	}
	if len(l.seen) > 4096 {
		slog.Warn("many sources call the open API routes at once", "sources", len(l.seen))
	}
}
