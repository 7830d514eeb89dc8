package cluster

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"sync/atomic"
	"time"
)

// RenewingCert serves the daemon's HTTPS certificate and replaces it before it expires,
// without restarting the listener: use TLSConfig for the listener and Run in the
// background.
type RenewingCert struct {
	ca    *CA
	dir   string
	names []string
	ips   []net.IP
	cur   atomic.Pointer[tls.Certificate]
}

// NewRenewingCert ensures the server certificate (EnsureServerCert) and returns a holder
// that keeps it fresh.
func NewRenewingCert(ca *CA, dir string, names []string, ips []net.IP) (*RenewingCert, error) {
	rc := &RenewingCert{ca: ca, dir: dir, names: names, ips: ips}
	if err := rc.renew(time.Now()); err != nil {
		return nil, err
	}
	return rc, nil
}

func (rc *RenewingCert) renew(now time.Time) error {
	pair, err := ensureServerCert(rc.ca, rc.dir, rc.names, rc.ips, now)
	if err != nil {
		return err
	}
	if old := rc.cur.Load(); old == nil || !old.Leaf.Equal(pair.Leaf) {
		rc.cur.Store(&pair)
		if old != nil {
			slog.Info("HTTPS certificate renewed", "fingerprint", Fingerprint(pair.Leaf), "expires", pair.Leaf.NotAfter)
		}
	}
	return nil
}

// Certificate returns the current certificate.
func (rc *RenewingCert) Certificate() *tls.Certificate { return rc.cur.Load() }

// TLSConfig is ServerTLSConfig serving whatever certificate is current.
func (rc *RenewingCert) TLSConfig() *tls.Config {
	cfg := ServerTLSConfig(tls.Certificate{})
	cfg.Certificates = nil
	cfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return rc.cur.Load(), nil }
	return cfg
}

// Run checks the certificate every interval until ctx ends, renewing it when due;
// failures are logged and retried at the next check.
func (rc *RenewingCert) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if err := rc.renew(now); err != nil {
				slog.Warn("HTTPS certificate renewal failed; retrying later", "error", err)
			}
		}
	}
}

// RunPurge deletes expired join tokens every interval until ctx ends.
func (s *Service) RunPurge(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, err := PurgeExpired(ctx, s.db, s.now()); err != nil {
				slog.Warn("purging expired join tokens failed", "error", err)
			} else if n > 0 {
				slog.Info("purged expired join tokens", "count", n)
			}
		}
	}
}
