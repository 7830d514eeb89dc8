package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/osdcloud/osd/bootstrap/fsutil"
)

// Certificate lifetimes and the renewal window.
const (
	CALifetime   = 10 * 365 * 24 * time.Hour
	LeafLifetime = 365 * 24 * time.Hour
	RenewBefore  = 30 * 24 * time.Hour
	// MemberCertLifetime is how long a member certificate lasts by default; members
	// renew theirs when half of its life has passed (MemberCertDue).
	MemberCertLifetime = 365 * 24 * time.Hour
	clockSkewSlack     = time.Hour // NotBefore is backdated by this much
)

// File names under the identity directory.
const (
	caCertFile     = "cluster-ca.crt"
	caKeyFile      = "cluster-ca.key"
	serverCertFile = "server.crt"
	serverKeyFile  = "server.key"
)

// CA is the cluster certificate authority: it signs server and member certificates, and
// its fingerprint is what join tokens pin.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	Key     *ecdsa.PrivateKey
}

// Fingerprint returns the CA certificate's fingerprint.
func (ca *CA) Fingerprint() string { return Fingerprint(ca.Cert) }

// Fingerprint is the lowercase hex SHA-256 of the certificate's DER encoding.
func Fingerprint(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	return hex.EncodeToString(sum[:])
}

// NeedsRenewal reports whether cert should be replaced at now: it is not yet valid, or
// fewer than RenewBefore remain.
func NeedsRenewal(cert *x509.Certificate, now time.Time) bool {
	return now.Before(cert.NotBefore) || !now.Add(RenewBefore).Before(cert.NotAfter)
}

// EnsureCA loads the cluster CA from dir or creates it (key 0600, dir 0700). Re-running
// reuses the existing CA. A certificate without its key is refused rather than replaced
// (replacing a CA that members pinned breaks them); a key without its certificate is
// what a crash during creation leaves, and is replaced.
func EnsureCA(dir string) (*CA, error) {
	return ensureCA(dir, time.Now())
}

func ensureCA(dir string, now time.Time) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, caCertFile), filepath.Join(dir, caKeyFile)
	certPEM, certErr := os.ReadFile(certPath)
	keyPEM, keyErr := os.ReadFile(keyPath)
	switch {
	case certErr == nil && keyErr == nil:
		ca, err := parseCA(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("load cluster CA from %s: %w", dir, err)
		}
		return ca, nil
	case certErr == nil && errors.Is(keyErr, os.ErrNotExist):
		return nil, fmt.Errorf("cluster CA key %s is missing while its certificate exists; restore it from a backup (a new CA would lock every member out)", keyPath)
	case certErr != nil && !errors.Is(certErr, os.ErrNotExist):
		return nil, fmt.Errorf("load cluster CA: %w", certErr)
	case keyErr != nil && !errors.Is(keyErr, os.ErrNotExist):
		return nil, fmt.Errorf("load cluster CA: %w", keyErr)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate cluster CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          newSerial(),
		Subject:               pkix.Name{CommonName: "osd cluster CA", Organization: []string{"osd"}},
		NotBefore:             now.Add(-clockSkewSlack),
		NotAfter:              now.Add(CALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create cluster CA: %w", err)
	}
	certPEM, keyPEM, err = encodePair(der, key)
	if err != nil {
		return nil, err
	}
	// Key first: a crash between the writes leaves a key without a certificate, which
	// the next run replaces; nobody can have pinned a certificate never written.
	if err := writePair(certPath, certPEM, keyPath, keyPEM); err != nil {
		return nil, fmt.Errorf("write cluster CA: %w", err)
	}
	return parseCA(certPEM, keyPEM)
}

func parseCA(certPEM, keyPEM []byte) (*CA, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("CA key is %T, want ECDSA", pair.PrivateKey)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, err
	}
	if !cert.IsCA {
		return nil, errors.New("certificate is not a CA")
	}
	return &CA{Cert: cert, CertPEM: certPEM, Key: key}, nil
}

// EnsureServerCert loads the daemon's HTTPS certificate from dir, or issues a new one
// from ca when it is missing, unreadable, not signed by ca, due for renewal (NeedsRenewal)
// or does not cover every name and IP asked for. The returned certificate carries the
// chain leaf, CA so clients can pin the CA.
func EnsureServerCert(ca *CA, dir string, names []string, ips []net.IP) (tls.Certificate, error) {
	return ensureServerCert(ca, dir, names, ips, time.Now())
}

func ensureServerCert(ca *CA, dir string, names []string, ips []net.IP, now time.Time) (tls.Certificate, error) {
	certPath, keyPath := filepath.Join(dir, serverCertFile), filepath.Join(dir, serverKeyFile)
	if pair, ok := loadLeaf(ca, certPath, keyPath, names, ips, now); ok {
		return pair, nil
	}
	certPEM, keyPEM, err := issue(ca, leafTemplate("osd server", names, ips, now,
		[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("issue server certificate: %w", err)
	}
	if err := writePair(certPath, certPEM, keyPath, keyPEM); err != nil {
		return tls.Certificate{}, fmt.Errorf("write server certificate: %w", err)
	}
	return chainPair(ca, certPEM, keyPEM)
}

// loadLeaf returns the stored certificate when it is usable as is.
func loadLeaf(ca *CA, certPath, keyPath string, names []string, ips []net.IP, now time.Time) (tls.Certificate, bool) {
	certPEM, err1 := os.ReadFile(certPath)
	keyPEM, err2 := os.ReadFile(keyPath)
	if err1 != nil || err2 != nil {
		return tls.Certificate{}, false
	}
	pair, err := chainPair(ca, certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, false
	}
	leaf := pair.Leaf
	if leaf.CheckSignatureFrom(ca.Cert) != nil || NeedsRenewal(leaf, now) || !covers(leaf, names, ips) {
		return tls.Certificate{}, false
	}
	return pair, true
}

// covers reports whether cert names every DNS name and IP wanted.
func covers(cert *x509.Certificate, names []string, ips []net.IP) bool {
	for _, n := range names {
		if !slices.Contains(cert.DNSNames, n) {
			return false
		}
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

func chainPair(ca *CA, certPEM, keyPEM []byte) (tls.Certificate, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, err
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return tls.Certificate{}, err
		}
	}
	pair.Certificate = append(pair.Certificate[:1:1], ca.Cert.Raw)
	return pair, nil
}

// IssueMemberCert issues member name's certificate for the public key pub, valid for
// lifetime from now: for client use only (the member's mTLS identity towards the
// cluster's HTTPS API; it cannot serve as a server certificate), naming the member in its
// subject and DNS names.
func IssueMemberCert(ca *CA, name string, pub crypto.PublicKey, now time.Time, lifetime time.Duration) ([]byte, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	tmpl := leafTemplate(name, []string{name}, nil, now, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
	tmpl.NotAfter = now.Add(lifetime)
	if lifetime < 2*clockSkewSlack {
		// A short-lived certificate (tests) is not backdated by more than a fraction of it.
		tmpl.NotBefore = now.Add(-lifetime / 10)
	}
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("issue member certificate for %s: %w", name, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// MemberCertDue reports whether a member should renew cert at now: half of its life has
// passed (or it is not valid yet, or no longer).
func MemberCertDue(cert *x509.Certificate, now time.Time) bool {
	half := cert.NotBefore.Add(cert.NotAfter.Sub(cert.NotBefore) / 2)
	return !now.Before(half) || now.Before(cert.NotBefore)
}

func leafTemplate(cn string, names []string, ips []net.IP, now time.Time, usage []x509.ExtKeyUsage) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber:          newSerial(),
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"osd"}},
		DNSNames:              names,
		IPAddresses:           ips,
		NotBefore:             now.Add(-clockSkewSlack),
		NotAfter:              now.Add(LeafLifetime),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           usage,
		BasicConstraintsValid: true,
	}
}

func issue(ca *CA, tmpl *x509.Certificate) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, err
	}
	return encodePair(der, key)
}

func encodePair(der []byte, key *ecdsa.PrivateKey) (certPEM, keyPEM []byte, err error) {
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), nil
}

func writePair(certPath string, certPEM []byte, keyPath string, keyPEM []byte) error {
	if err := os.MkdirAll(filepath.Dir(keyPath), 0o700); err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(keyPath, keyPEM, 0o600); err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(certPath, certPEM, 0o644)
}

func newSerial() *big.Int {
	// 128 random bits; crypto/rand.Int never fails on Linux.
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		panic(fmt.Sprintf("read random serial: %v", err))
	}
	return n
}

// ParseCertPEM parses the first certificate in a PEM block.
func ParseCertPEM(data []byte) (*x509.Certificate, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, errors.New("no PEM certificate found")
		}
		if b.Type == "CERTIFICATE" {
			return x509.ParseCertificate(b.Bytes)
		}
	}
}

func pemCert(cert *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
}
