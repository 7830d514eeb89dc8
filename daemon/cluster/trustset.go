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

// TrustSet is the in-memory copy of the trust table (and of the certificates of removed
// members) the Authorizer consults on every request: the database is not hit per request.
// Reload it after every change.
type TrustSet struct {
	fps atomic.Pointer[map[string]trustEntry]
}

type trustEntry struct{ kind, name string }

// trustKindRemoved marks, in the set only, the certificate of a removed member.
const trustKindRemoved = "removed"

// Load replaces the set with the fingerprints stored in db.
func (s *TrustSet) Load(ctx context.Context, db *store.DB) error {
	recs, err := db.ListTrust(ctx)
	if err != nil {
		return err
	}
	removed, err := db.ListRemovedMembers(ctx)
	if err != nil {
		return err
	}
	m := make(map[string]trustEntry, len(recs)+len(removed))
	for _, r := range removed {
		m[r.Fingerprint] = trustEntry{kind: trustKindRemoved, name: r.Name}
	}
	for _, r := range recs {
		m[r.Fingerprint] = trustEntry{kind: r.Kind, name: r.Name}
	}
	s.fps.Store(&m)
	return nil
}

func (s *TrustSet) lookup(fp string) (trustEntry, bool) {
	m := s.fps.Load()
	if m == nil {
		return trustEntry{}, false
	}
	e, ok := (*m)[fp]
	return e, ok
}

// Trusted reports whether fingerprint is trusted (an operator's or a member's).
func (s *TrustSet) Trusted(fingerprint string) bool {
	e, ok := s.lookup(fingerprint)
	return ok && e.kind != trustKindRemoved
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
