package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/osdcloud/osd/bootstrap/fsutil"
)

// Files a joined member keeps under its identity directory. They are distinct from the
// CA files EnsureCA manages: a member holds the CA certificate but never its key.
const (
	memberCAFile   = "member-ca.crt"
	memberPairFile = "member.pem" // certificate and key in one file, replaced atomically
	// The certificate and key in two files, as members that joined before kept them.
	memberCertFile = "member.crt"
	memberKeyFile  = "member.key"
)

// MemberIdentity is what a joined member keeps: the cluster CA certificate (to pin the
// cluster) and its member certificate (its mTLS client certificate towards the cluster).
type MemberIdentity struct {
	CA   *x509.Certificate
	Cert tls.Certificate
}

// MemberKey is a member's private key with the certificate request that asks the
// cluster to certify it. The key is made on the member and never leaves it.
type MemberKey struct {
	Key    *ecdsa.PrivateKey
	CSRPEM string
}

// NewMemberKey makes a fresh key for member name and its certificate request.
func NewMemberKey(name string) (*MemberKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate member key: %w", err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: name}}, key)
	if err != nil {
		return nil, fmt.Errorf("member certificate request: %w", err)
	}
	return &MemberKey{Key: key, CSRPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))}, nil
}

// SaveMemberIdentity stores, under dir, the member certificate certPEM the cluster issued
// for key and the cluster CA caPEM (certificate and key in one 0600 file, replaced
// atomically, so a crash never leaves a certificate without its key). It refuses a CA
// whose fingerprint is not pin (the one the join token pinned), a certificate not signed
// by that CA, or one that does not certify key.
func SaveMemberIdentity(dir, pin, caPEM, certPEM string, key *ecdsa.PrivateKey) (*MemberIdentity, error) {
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode member key: %w", err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
	id, err := parseMemberIdentity([]byte(caPEM), []byte(certPEM), keyPEM)
	if err != nil {
		return nil, fmt.Errorf("member credentials: %w", err)
	}
	if got := Fingerprint(id.CA); got != pin {
		return nil, fmt.Errorf("%w: the cluster sent CA %s, the join token pinned %s", ErrPinMismatch, got, pin)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("save member identity: %w", err)
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(dir, memberCAFile), []byte(caPEM), 0o644); err != nil {
		return nil, fmt.Errorf("save member identity: %w", err)
	}
	pair := append([]byte(certPEM), keyPEM...)
	if err := fsutil.WriteFileAtomic(filepath.Join(dir, memberPairFile), pair, 0o600); err != nil {
		return nil, fmt.Errorf("save member identity: %w", err)
	}
	for _, old := range []string{memberCertFile, memberKeyFile} {
		_ = os.Remove(filepath.Join(dir, old))
	}
	return id, nil
}

// LoadMemberIdentity loads what SaveMemberIdentity stored; os.ErrNotExist (wrapped) when
// this node never joined.
func LoadMemberIdentity(dir string) (*MemberIdentity, error) {
	caPEM, err := os.ReadFile(filepath.Join(dir, memberCAFile))
	if err != nil {
		return nil, fmt.Errorf("load member identity: %w", err)
	}
	pair, err := os.ReadFile(filepath.Join(dir, memberPairFile))
	if errors.Is(err, os.ErrNotExist) {
		return loadLegacyIdentity(dir, caPEM)
	}
	if err != nil {
		return nil, fmt.Errorf("load member identity: %w", err)
	}
	id, err := parseMemberIdentity(caPEM, pair, pair)
	if err != nil {
		return nil, fmt.Errorf("load member identity from %s: %w", dir, err)
	}
	return id, nil
}

func loadLegacyIdentity(dir string, caPEM []byte) (*MemberIdentity, error) {
	var data [2][]byte
	for i, name := range []string{memberCertFile, memberKeyFile} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("load member identity: %w", err)
		}
		data[i] = b
	}
	id, err := parseMemberIdentity(caPEM, data[0], data[1])
	if err != nil {
		return nil, fmt.Errorf("load member identity from %s: %w", dir, err)
	}
	return id, nil
}

func parseMemberIdentity(caPEM, certPEM, keyPEM []byte) (*MemberIdentity, error) {
	caCert, err := ParseCertPEM(caPEM)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	if !caCert.IsCA {
		return nil, fmt.Errorf("CA certificate %s is not a CA", Fingerprint(caCert))
	}
	pair, err := chainPair(&CA{Cert: caCert}, certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("member certificate: %w", err)
	}
	if err := pair.Leaf.CheckSignatureFrom(caCert); err != nil {
		return nil, fmt.Errorf("member certificate is not signed by the cluster CA: %w", err)
	}
	return &MemberIdentity{CA: caCert, Cert: pair}, nil
}
