// Package ovnchassis keeps this host's OVN chassis certificate: a key made here and never
// sent anywhere, and a certificate from osd's OVN CA whose common name is the chassis name
// (the host's Open vSwitch system-id), which the southbound database's RBAC role
// ovn-controller compares rows with. The files live in a host directory that the ovn
// chart's ovn-controller and Neutron's metadata agent mount read-only.
package ovnchassis

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/osdcloud/osd/bootstrap/fsutil"
	"github.com/osdcloud/osd/netsetup"
	"github.com/osdcloud/osd/netsetup/ovnpki"
)

// Files in the certificate directory (what the charts read).
const (
	KeyFile  = "chassis.key"
	CertFile = "chassis.crt"
	CAFile   = "ca.crt"
)

// DirName is the directory's name in tests.
const DirName = "ovn-chassis"

// Dir is where a host keeps its chassis certificate: beside Open vSwitch's own state,
// whose system-id the certificate names, at one path on every node (a DaemonSet mounts one
// host path on all of them, while state dirs may differ: the snap's, a test node's).
// charts/ovn tls.chassisCertDir and charts/neutron metadataAgent.chassisCertDir are it;
// osd reset removes it.
const Dir = "/var/lib/openvswitch/osd-ovn-chassis"

// Signer signs a certificate request for chassis systemID and returns the certificate
// and the OVN CA, both PEM.
type Signer func(ctx context.Context, systemID, csrPEM string) (certPEM, caPEM []byte, err error)

// ErrNoOVS is returned (wrapped) by SystemID on a host whose Open vSwitch does not run
// (a node without the openvswitch role, or before host preparation).
var ErrNoOVS = errors.New("open vswitch does not run here")

// SystemID reads this host's chassis name from its Open vSwitch.
func SystemID(ctx context.Context) (string, error) {
	c := netsetup.DefaultOVSConfig()
	if _, err := os.Stat(c.Socket()); err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoOVS, err)
	}
	o, err := netsetup.ConnectOVS(ctx, c)
	if err != nil {
		return "", fmt.Errorf("open vswitch: %w", err)
	}
	defer o.Close()
	ids, err := o.ExternalIDs(ctx)
	if err != nil {
		return "", fmt.Errorf("open vswitch external_ids: %w", err)
	}
	id := ids["system-id"]
	if err := ovnpki.ValidChassisName(id); err != nil {
		return "", err
	}
	return id, nil
}

// Due reports whether dir lacks a current certificate for systemID whose key is the one
// in dir (pure but for reading dir): a crash between writing the key and the certificate
// leaves a pair that does not match, which the next pass replaces.
func Due(dir, systemID string, now time.Time) bool {
	caPEM, err1 := os.ReadFile(filepath.Join(dir, CAFile))
	certPEM, err2 := os.ReadFile(filepath.Join(dir, CertFile))
	keyPEM, err3 := os.ReadFile(filepath.Join(dir, KeyFile))
	if err1 != nil || err2 != nil || err3 != nil {
		return true
	}
	ca, err := ovnpki.ParseCert(caPEM)
	if err != nil {
		return true
	}
	if ovnpki.Due(&ovnpki.CA{Cert: ca}, certPEM, systemID, nil, nil, now) {
		return true
	}
	return !keyMatches(keyPEM, certPEM)
}

// keyMatches reports whether keyPEM (PKCS #8) is the private key of certPEM's public key.
func keyMatches(keyPEM, certPEM []byte) bool {
	kb, _ := pem.Decode(keyPEM)
	cert, err := ovnpki.ParseCert(certPEM)
	if kb == nil || err != nil {
		return false
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return false
	}
	priv, ok := key.(interface{ Public() crypto.PublicKey })
	pub, ok2 := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	return ok && ok2 && pub.Equal(priv.Public())
}

// Ensure makes dir hold a current certificate for systemID, asking sign for one when it
// is missing, for another name or due. It reports whether it wrote one.
func Ensure(ctx context.Context, dir, systemID string, sign Signer, now time.Time) (bool, error) {
	if err := ovnpki.ValidChassisName(systemID); err != nil {
		return false, err
	}
	if !Due(dir, systemID, now) {
		return false, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return false, fmt.Errorf("generate the chassis key: %w", err)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: systemID}}, key)
	if err != nil {
		return false, fmt.Errorf("chassis certificate request: %w", err)
	}
	certPEM, caPEM, err := sign(ctx, systemID, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csr})))
	if err != nil {
		return false, fmt.Errorf("sign the chassis certificate of %s: %w", systemID, err)
	}
	if err := check(certPEM, caPEM, systemID, key, now); err != nil {
		return false, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return false, fmt.Errorf("encode the chassis key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("create %s: %w", dir, err)
	}
	// Key, then CA, then certificate: a crash in between leaves a certificate that does
	// not match, which Due reports and the next pass replaces; ovn-controller reloads
	// changed files itself.
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{KeyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600},
		{CAFile, caPEM, 0o644},
		{CertFile, certPEM, 0o644},
	} {
		if err := fsutil.WriteFileAtomic(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return false, fmt.Errorf("write %s: %w", f.name, err)
		}
	}
	return true, nil
}

// check verifies what a signer returned: a client certificate from caPEM for systemID's
// name and this key.
func check(certPEM, caPEM []byte, systemID string, key *ecdsa.PrivateKey, now time.Time) error {
	ca, err := ovnpki.ParseCert(caPEM)
	if err != nil {
		return fmt.Errorf("the OVN CA returned: %w", err)
	}
	cert, err := ovnpki.ParseCert(certPEM)
	if err != nil {
		return fmt.Errorf("the chassis certificate returned: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, CurrentTime: now}); err != nil {
		return fmt.Errorf("the chassis certificate returned: %w", err)
	}
	if cert.Subject.CommonName != systemID || !key.PublicKey.Equal(cert.PublicKey) {
		return errors.New("the chassis certificate returned is for another name or key")
	}
	return nil
}

// SignWith is the Signer of the node holding the OVN CA: ca (loaded per call, so that a
// new CA is used at once) signs for systemID.
func SignWith(load func(ctx context.Context) (*ovnpki.CA, error), now func() time.Time) Signer {
	return func(ctx context.Context, systemID, csrPEM string) ([]byte, []byte, error) {
		ca, err := load(ctx)
		if err != nil {
			return nil, nil, err
		}
		pub, err := ParseCSR(csrPEM)
		if err != nil {
			return nil, nil, err
		}
		cert, err := ca.SignChassis(systemID, pub, now())
		if err != nil {
			return nil, nil, err
		}
		return cert, ca.CertPEM, nil
	}
}

// maxCSR bounds a certificate request's size.
const maxCSR = 8 << 10

// ParseCSR reads a PEM certificate request and checks its signature (the requester holds
// the key); it returns the public key.
func ParseCSR(csrPEM string) (any, error) {
	if len(csrPEM) > maxCSR {
		return nil, fmt.Errorf("certificate request is %d bytes, want at most %d", len(csrPEM), maxCSR)
	}
	b, _ := pem.Decode([]byte(csrPEM))
	if b == nil || b.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("certificate request is not a PEM CERTIFICATE REQUEST block")
	}
	csr, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("certificate request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("certificate request signature: %w", err)
	}
	return csr.PublicKey, nil
}
