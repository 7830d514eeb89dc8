package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"

	"github.com/osdcloud/osd/daemon/fsutil"
)

// Files a joined member keeps under its identity directory. They are distinct from the
// CA files EnsureCA manages: a member holds the CA certificate but never its key.
const (
	memberCAFile   = "member-ca.crt"
	memberCertFile = "member.crt"
	memberKeyFile  = "member.key"
)

// MemberIdentity is what a joined member keeps: the cluster CA certificate (to pin other
// members) and its member certificate (its HTTPS server and mTLS client certificate, with
// the CA in its chain).
type MemberIdentity struct {
	CA   *x509.Certificate
	Cert tls.Certificate
}

// SaveMemberIdentity stores the credentials a join returned under dir (key 0600). It
// refuses credentials whose certificate is not signed by the CA they came with.
func SaveMemberIdentity(dir string, creds JoinResponse) (*MemberIdentity, error) {
	id, err := parseMemberIdentity([]byte(creds.CACertPEM), []byte(creds.MemberCertPEM), []byte(creds.MemberKeyPEM))
	if err != nil {
		return nil, fmt.Errorf("member credentials: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("save member identity: %w", err)
	}
	if err := writePair(filepath.Join(dir, memberCertFile), []byte(creds.MemberCertPEM),
		filepath.Join(dir, memberKeyFile), []byte(creds.MemberKeyPEM)); err != nil {
		return nil, fmt.Errorf("save member identity: %w", err)
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(dir, memberCAFile), []byte(creds.CACertPEM), 0o644); err != nil {
		return nil, fmt.Errorf("save member identity: %w", err)
	}
	return id, nil
}

// LoadMemberIdentity loads what SaveMemberIdentity stored; os.ErrNotExist (wrapped) when
// this node never joined.
func LoadMemberIdentity(dir string) (*MemberIdentity, error) {
	var data [3][]byte
	for i, name := range []string{memberCAFile, memberCertFile, memberKeyFile} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("load member identity: %w", err)
		}
		data[i] = b
	}
	id, err := parseMemberIdentity(data[0], data[1], data[2])
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
