// Package ovnpki issues the certificates with which OVN's northbound and southbound
// databases and their clients authenticate each other: a CA of OVN's own (not the
// cluster CA, so that a key leaked from a pod or a hypervisor authenticates to nothing
// but OVSDB), server certificates for the databases, client certificates for the
// services that may write everything (Neutron's server, osd) and chassis certificates
// whose common name is the chassis name, as the southbound database's RBAC role
// "ovn-controller" requires. Everything here is pure but for the randomness of keys.
package ovnpki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"regexp"
	"time"
)

// Lifetimes. Leaf certificates are reissued when Due says so: in the last third of their
// life.
const (
	CALifetime   = 10 * 365 * 24 * time.Hour
	LeafLifetime = 2 * 365 * 24 * time.Hour
	// ChassisLifetime is a chassis certificate's: short, because nothing revokes one. A
	// removed member cannot renew its own (only members may ask), so its chassis
	// certificate stops working within this time; members renew theirs every few hours
	// once 20 days have passed.
	ChassisLifetime = 30 * 24 * time.Hour
	skew            = time.Hour // NotBefore is backdated by this much
)

// RenewAt is when cert is due for renewal: two thirds into its life.
func RenewAt(cert *x509.Certificate) time.Time {
	return cert.NotAfter.Add(-cert.NotAfter.Sub(cert.NotBefore) / 3)
}

// CA is the OVN certificate authority.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	Key     crypto.Signer
}

// Pair is a certificate and its private key, both PEM (the key PKCS#8, which OpenSSL,
// Python's ssl and Go all read).
type Pair struct {
	CertPEM []byte
	KeyPEM  []byte
}

// NewCA creates a CA valid from now.
func NewCA(now time.Time) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("generate the OVN CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "osd OVN CA", Organization: []string{"osd"}},
		NotBefore:             now.Add(-skew),
		NotAfter:              now.Add(CALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return Pair{}, fmt.Errorf("create the OVN CA: %w", err)
	}
	return encode(der, key)
}

// ParseCA reads a CA written by NewCA.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := ParseCert(certPEM)
	if err != nil {
		return nil, fmt.Errorf("OVN CA: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("OVN CA: the certificate is not a CA")
	}
	b, _ := pem.Decode(keyPEM)
	if b == nil {
		return nil, errors.New("OVN CA: the key is not PEM")
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("OVN CA key: %w", err)
	}
	signer, ok := k.(*ecdsa.PrivateKey)
	if !ok || !signer.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("OVN CA: the key does not belong to the certificate")
	}
	return &CA{Cert: cert, CertPEM: certPEM, Key: signer}, nil
}

// IssueServer issues a database server's certificate for the names and addresses clients
// dial. It may also act as a client (ovsdb-server's own connections).
func (ca *CA) IssueServer(cn string, names []string, ips []net.IP, now time.Time) (Pair, error) {
	if cn == "" {
		return Pair{}, errors.New("a server certificate needs a name")
	}
	return ca.issue(leaf(cn, names, ips, now, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth))
}

// IssueClient issues a client certificate with common name cn (for a chassis: its name,
// which the southbound RBAC role compares rows with).
func (ca *CA) IssueClient(cn string, now time.Time) (Pair, error) {
	if cn == "" {
		return Pair{}, errors.New("a client certificate needs a common name")
	}
	return ca.issue(leaf(cn, nil, nil, now, x509.ExtKeyUsageClientAuth))
}

// SignChassis signs a chassis' client certificate (common name cn, its chassis name; life
// ChassisLifetime) for pub, a key that never left the chassis. It returns the certificate
// as PEM.
func (ca *CA) SignChassis(cn string, pub crypto.PublicKey, now time.Time) ([]byte, error) {
	if cn == "" {
		return nil, errors.New("a client certificate needs a common name")
	}
	tmpl := leaf(cn, nil, nil, now, x509.ExtKeyUsageClientAuth)
	tmpl.NotAfter = now.Add(ChassisLifetime)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("sign the certificate of %s: %w", cn, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

func (ca *CA) issue(tmpl *x509.Certificate) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("generate a key: %w", err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return Pair{}, fmt.Errorf("sign the certificate of %s: %w", tmpl.Subject.CommonName, err)
	}
	return encode(der, key)
}

func leaf(cn string, names []string, ips []net.IP, now time.Time, usage ...x509.ExtKeyUsage) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"osd"}},
		DNSNames:     names,
		IPAddresses:  ips,
		NotBefore:    now.Add(-skew),
		NotAfter:     now.Add(LeafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
	}
}

func encode(der []byte, key *ecdsa.PrivateKey) (Pair, error) {
	k, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Pair{}, fmt.Errorf("encode a key: %w", err)
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k}),
	}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // the kernel's RNG does not fail
	}
	return n
}

// ParseCert reads the first certificate of a PEM bundle.
func ParseCert(certPEM []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(certPEM)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("not a PEM certificate")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse certificate: %w", err)
	}
	return c, nil
}

// Due reports whether the leaf certificate certPEM must be (re)issued at now by ca: it is
// unreadable, not signed by ca, not for cn, lacks one of names/ips, is not yet valid or
// is past RenewAt.
func Due(ca *CA, certPEM []byte, cn string, names []string, ips []net.IP, now time.Time) bool {
	c, err := ParseCert(certPEM)
	if err != nil || c.CheckSignatureFrom(ca.Cert) != nil || c.Subject.CommonName != cn {
		return true
	}
	if now.Before(c.NotBefore) || !now.Before(RenewAt(c)) {
		return true
	}
	for _, n := range names {
		if c.VerifyHostname(n) != nil {
			return true
		}
	}
	for _, ip := range ips {
		if c.VerifyHostname(ip.String()) != nil {
			return true
		}
	}
	return false
}

// chassisName is what osd accepts as a chassis name (an OVS system-id): what
// ovs-ctl --system-id=random makes (a UUID) or a host name; nothing a certificate's
// subject or a shell could misread.
var chassisName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// ValidChassisName checks a chassis name before it becomes a certificate's common name.
func ValidChassisName(s string) error {
	if !chassisName.MatchString(s) {
		return fmt.Errorf("chassis name %q is not a UUID or host name", s)
	}
	return nil
}

// ClientTLS is the Go TLS configuration of a client of OVN's databases: the server must
// present a certificate from ca for serverName (a name or an IP address); cert, if not
// nil, is presented.
func ClientTLS(ca *x509.Certificate, cert *tls.Certificate, serverName string) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, ServerName: serverName}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return cfg
}
