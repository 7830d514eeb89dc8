package cluster

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	if st.Mode().Perm() != want {
		t.Errorf("mode of %s = %v, want %v", path, st.Mode().Perm(), want)
	}
}

func TestEnsureCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "identity")
	ca, err := EnsureCA(dir)
	if err != nil {
		t.Fatalf("EnsureCA() = %v, want nil", err)
	}
	if !ca.Cert.IsCA || ca.Cert.PublicKeyAlgorithm != x509.ECDSA || ca.Key.Curve.Params().Name != "P-256" {
		t.Errorf("CA = IsCA %v, %v %s, want an ECDSA P-256 CA", ca.Cert.IsCA, ca.Cert.PublicKeyAlgorithm, ca.Key.Curve.Params().Name)
	}
	if life := ca.Cert.NotAfter.Sub(ca.Cert.NotBefore); life < CALifetime || life > CALifetime+2*time.Hour {
		t.Errorf("CA lifetime = %v, want about %v", life, CALifetime)
	}
	checkMode(t, dir, 0o700)
	checkMode(t, filepath.Join(dir, caKeyFile), 0o600)
	checkMode(t, filepath.Join(dir, caCertFile), 0o644)

	again, err := EnsureCA(dir)
	if err != nil || again.Fingerprint() != ca.Fingerprint() {
		t.Fatalf("EnsureCA() again = %v, %v, want the same CA %s", again, err, ca.Fingerprint())
	}

	// A crash after the key was written and before the certificate: replaced.
	if err := os.Remove(filepath.Join(dir, caCertFile)); err != nil {
		t.Fatal(err)
	}
	fresh, err := EnsureCA(dir)
	if err != nil || fresh.Fingerprint() == ca.Fingerprint() {
		t.Fatalf("EnsureCA(key without cert) = %v, want a new CA", err)
	}
	// The certificate without its key: refused, never silently replaced.
	if err := os.Remove(filepath.Join(dir, caKeyFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureCA(dir); err == nil || !strings.Contains(err.Error(), "restore it from a backup") {
		t.Errorf("EnsureCA(cert without key) = %v, want a refusal saying to restore the key", err)
	}
	// Garbage: refused.
	if err := os.WriteFile(filepath.Join(dir, caKeyFile), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureCA(dir); err == nil {
		t.Error("EnsureCA(garbage key) = nil, want an error")
	}
}

func TestEnsureServerCert(t *testing.T) {
	dir := t.TempDir()
	ca, err := EnsureCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"node1"}
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")}
	now := time.Now()
	pair, err := ensureServerCert(ca, dir, names, ips, now)
	if err != nil {
		t.Fatalf("EnsureServerCert() = %v, want nil", err)
	}
	checkMode(t, filepath.Join(dir, serverKeyFile), 0o600)
	leaf := pair.Leaf
	if len(pair.Certificate) != 2 || Fingerprint(mustParse(t, pair.Certificate[1])) != ca.Fingerprint() {
		t.Errorf("server chain has %d certificates, want leaf then the CA", len(pair.Certificate))
	}
	if err := leaf.CheckSignatureFrom(ca.Cert); err != nil {
		t.Errorf("server certificate not signed by the CA: %v", err)
	}
	if life := leaf.NotAfter.Sub(leaf.NotBefore); life < LeafLifetime || life > LeafLifetime+2*time.Hour {
		t.Errorf("server certificate lifetime = %v, want about %v", life, LeafLifetime)
	}
	fp := Fingerprint(leaf)

	cases := []struct {
		name    string
		ca      *CA
		names   []string
		ips     []net.IP
		now     time.Time
		reissue bool
	}{
		{"same inputs reuse", ca, names, ips, now, false},
		{"subset of names reuses", ca, nil, ips[:1], now, false},
		{"200 days later reuses", ca, names, ips, now.Add(200 * 24 * time.Hour), false},
		{"29 days before expiry renews", ca, names, ips, leaf.NotAfter.Add(-29 * 24 * time.Hour), true},
		{"new IP renews", ca, names, append(ips, net.ParseIP("192.0.2.7")), now, true},
		{"new name renews", ca, []string{"node1", "node1.example"}, ips, now, true},
		{"another CA renews", mustCA(t), names, ips, now, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sub := t.TempDir()
			copyFile(t, filepath.Join(dir, serverCertFile), filepath.Join(sub, serverCertFile))
			copyFile(t, filepath.Join(dir, serverKeyFile), filepath.Join(sub, serverKeyFile))
			got, err := ensureServerCert(c.ca, sub, c.names, c.ips, c.now)
			if err != nil {
				t.Fatalf("EnsureServerCert() = %v, want nil", err)
			}
			if reissued := Fingerprint(got.Leaf) != fp; reissued != c.reissue {
				t.Errorf("EnsureServerCert() reissued = %v, want %v", reissued, c.reissue)
			}
			if c.reissue {
				if err := got.Leaf.CheckSignatureFrom(c.ca.Cert); err != nil || !covers(got.Leaf, c.names, c.ips) {
					t.Errorf("reissued certificate: signature %v, covers %v, want signed and covering", err, covers(got.Leaf, c.names, c.ips))
				}
				stored, err := os.ReadFile(filepath.Join(sub, serverCertFile))
				if err != nil {
					t.Fatal(err)
				}
				block, _ := pem.Decode(stored)
				if block == nil || Fingerprint(mustParse(t, block.Bytes)) != Fingerprint(got.Leaf) {
					t.Errorf("stored certificate is not the reissued one")
				}
			}
		})
	}
}

func mustParse(t *testing.T, der []byte) *x509.Certificate {
	t.Helper()
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustCA(t testing.TB) *CA {
	t.Helper()
	ca, err := EnsureCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestNeedsRenewal(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cert := &x509.Certificate{NotBefore: start, NotAfter: start.Add(365 * 24 * time.Hour)}
	cases := []struct {
		name string
		now  time.Time
		want bool
	}{
		{"before validity", start.Add(-time.Minute), true},
		{"fresh", start, false},
		{"31 days left", cert.NotAfter.Add(-31 * 24 * time.Hour), false},
		{"exactly 30 days left", cert.NotAfter.Add(-30 * 24 * time.Hour), true},
		{"one day left", cert.NotAfter.Add(-24 * time.Hour), true},
		{"expired", cert.NotAfter.Add(time.Hour), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := NeedsRenewal(cert, c.now); got != c.want {
				t.Errorf("NeedsRenewal(cert, %s) = %v, want %v", c.now, got, c.want)
			}
		})
	}
}

func TestFingerprint(t *testing.T) {
	ca := mustCA(t)
	block, _ := pem.Decode(ca.CertPEM)
	sum := sha256.Sum256(block.Bytes)
	if got, want := Fingerprint(ca.Cert), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("Fingerprint(CA) = %s, want %s", got, want)
	}
	if err := ValidateFingerprint(ca.Fingerprint()); err != nil {
		t.Errorf("ValidateFingerprint(Fingerprint(CA)) = %v, want nil", err)
	}
}

func TestIssueMemberCert(t *testing.T) {
	ca := mustCA(t)
	k, err := NewMemberKey("node2")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := IssueMemberCert(ca, "node2", &k.Key.PublicKey, time.Now(), MemberCertLifetime)
	if err != nil {
		t.Fatalf("IssueMemberCert(node2) = %v, want nil", err)
	}
	cert, err := ParseCertPEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "node2", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("member certificate Verify(client auth) = %v, want nil", err)
	}
	// A member certificate cannot pose as the cluster's server.
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "node2", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("member certificate Verify(server auth) = nil, want it refused")
	}
	if cert.Subject.CommonName != "node2" || cert.IsCA || !cert.PublicKey.(*ecdsa.PublicKey).Equal(&k.Key.PublicKey) {
		t.Errorf("member certificate CN %q IsCA %v, want node2, false, for the requested key", cert.Subject.CommonName, cert.IsCA)
	}
	if _, err := IssueMemberCert(ca, "Bad_Name", &k.Key.PublicKey, time.Now(), time.Hour); err == nil {
		t.Error("IssueMemberCert(Bad_Name) = nil, want a name error")
	}
}
