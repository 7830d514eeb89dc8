package cluster

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/osdcloud/osd/daemon/store"
)

// TrustSet is the in-memory copy of the trust table the Authorizer consults on every
// request (the database is not hit per request). Reload it after every change.
type TrustSet struct {
	fps atomic.Pointer[map[string]struct{}]
}

// Load replaces the set with the fingerprints stored in db.
func (s *TrustSet) Load(ctx context.Context, db *store.DB) error {
	recs, err := db.ListTrust(ctx)
	if err != nil {
		return err
	}
	m := make(map[string]struct{}, len(recs))
	for _, r := range recs {
		m[r.Fingerprint] = struct{}{}
	}
	s.fps.Store(&m)
	return nil
}

// Trusted reports whether fingerprint is in the set.
func (s *TrustSet) Trusted(fingerprint string) bool {
	m := s.fps.Load()
	if m == nil {
		return false
	}
	_, ok := (*m)[fingerprint]
	return ok
}

// TrustKindClient and TrustKindMember are the kinds of trusted certificates.
const (
	TrustKindClient = "client"
	TrustKindMember = "member"
)

// AddTrust trusts the certificate in certPEM under name as kind (client or member) and
// returns its fingerprint. It refuses a CA certificate and one that has expired.
func AddTrust(ctx context.Context, db *store.DB, name string, certPEM []byte, kind string, now time.Time) (string, error) {
	if kind != TrustKindClient && kind != TrustKindMember {
		return "", errorf(ErrInvalid, "trust kind %q, want client or member", kind)
	}
	if name == "" {
		return "", errorf(ErrInvalid, "a trusted certificate needs a name")
	}
	cert, err := ParseCertPEM(certPEM)
	if err != nil {
		return "", errorf(ErrInvalid, "certificate for %s: %w", name, err)
	}
	if err := usableClientCert(cert, now); err != nil {
		return "", errorf(ErrInvalid, "certificate for %s: %w", name, err)
	}
	fp := Fingerprint(cert)
	err = db.AddTrust(ctx, store.TrustRecord{Fingerprint: fp, Name: name, Kind: kind, CertPEM: string(certPEM), AddedAt: now})
	if errors.Is(err, store.ErrExists) {
		return "", errorf(ErrAlreadyTrusted, "certificate %s is already trusted", fp)
	}
	return fp, err
}

func usableClientCert(cert *x509.Certificate, now time.Time) error {
	if cert.IsCA {
		return errors.New("is a CA certificate; trust the client's own certificate")
	}
	if now.After(cert.NotAfter) {
		return fmt.Errorf("expired at %s", cert.NotAfter.Format(time.RFC3339))
	}
	return nil
}
