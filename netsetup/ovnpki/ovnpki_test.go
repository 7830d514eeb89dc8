package ovnpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"net"
	"testing"
	"time"
)

func testCA(t *testing.T, now time.Time) *CA {
	t.Helper()
	p, err := NewCA(now)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := ParseCA(p.CertPEM, p.KeyPEM)
	if err != nil {
		t.Fatalf("ParseCA(NewCA()) = %v", err)
	}
	return ca
}

func verify(t *testing.T, ca *CA, certPEM []byte, usage x509.ExtKeyUsage, name string, at time.Time) error {
	t.Helper()
	c, err := ParseCert(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	_, err = c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}, DNSName: name, CurrentTime: at})
	return err
}

func TestIssue(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ca := testCA(t, now)
	other := testCA(t, now)
	srv, err := ca.IssueServer("ovn-central", []string{"ovn-sb.openstack.svc.cluster.local"}, []net.IP{net.ParseIP("10.43.0.42")}, now)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := ca.IssueClient("0b5e6f3c-2d1e-4c8a-9f7b-1a2b3c4d5e6f", now)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	signed, err := ca.SignChassis("node2", &key.PublicKey, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		ca      *CA
		cert    []byte
		usage   x509.ExtKeyUsage
		host    string
		at      time.Time
		wantErr bool
	}{
		{"server by name", ca, srv.CertPEM, x509.ExtKeyUsageServerAuth, "ovn-sb.openstack.svc.cluster.local", now, false},
		{"server by cluster IP", ca, srv.CertPEM, x509.ExtKeyUsageServerAuth, "10.43.0.42", now, false},
		{"server for another name", ca, srv.CertPEM, x509.ExtKeyUsageServerAuth, "ovn-nb.openstack.svc.cluster.local", now, true},
		{"server from another CA", other, srv.CertPEM, x509.ExtKeyUsageServerAuth, "10.43.0.42", now, true},
		{"client", ca, cli.CertPEM, x509.ExtKeyUsageClientAuth, "", now, false},
		{"client as a server", ca, cli.CertPEM, x509.ExtKeyUsageServerAuth, "", now, true},
		{"client after its life", ca, cli.CertPEM, x509.ExtKeyUsageClientAuth, "", now.Add(LeafLifetime + time.Hour), true},
		{"signed key", ca, signed, x509.ExtKeyUsageClientAuth, "", now, false},
		{"signed key after a chassis' life", ca, signed, x509.ExtKeyUsageClientAuth, "", now.Add(ChassisLifetime + time.Hour), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := verify(t, tt.ca, tt.cert, tt.usage, tt.host, tt.at); (err != nil) != tt.wantErr {
				t.Errorf("Verify = %v, want error %v", err, tt.wantErr)
			}
		})
	}
	c, _ := ParseCert(signed)
	if c.Subject.CommonName != "node2" || !key.PublicKey.Equal(c.PublicKey) {
		t.Errorf("SignChassis: CN %q, key match %v, want node2 and the given key", c.Subject.CommonName, key.PublicKey.Equal(c.PublicKey))
	}
	if _, err := ca.IssueClient("", now); err == nil {
		t.Errorf("IssueClient(\"\") = nil error, want one")
	}
}

func TestParseCARefusesMismatch(t *testing.T) {
	now := time.Now()
	a, _ := NewCA(now)
	b, _ := NewCA(now)
	if _, err := ParseCA(a.CertPEM, b.KeyPEM); err == nil {
		t.Errorf("ParseCA(a's cert, b's key) = nil error, want a mismatch")
	}
	ca := testCA(t, now)
	leaf, _ := ca.IssueClient("x", now)
	if _, err := ParseCA(leaf.CertPEM, leaf.KeyPEM); err == nil {
		t.Errorf("ParseCA(a leaf) = nil error, want not a CA")
	}
}

func TestDue(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ca, other := testCA(t, now), testCA(t, now)
	ip := []net.IP{net.ParseIP("10.43.0.41")}
	srv, _ := ca.IssueServer("ovn-central", []string{"ovn-nb"}, ip, now)
	for _, tt := range []struct {
		name  string
		ca    *CA
		cert  []byte
		cn    string
		names []string
		ips   []net.IP
		at    time.Time
		want  bool
	}{
		{"fresh", ca, srv.CertPEM, "ovn-central", []string{"ovn-nb"}, ip, now, false},
		{"missing", ca, nil, "ovn-central", nil, nil, now, true},
		{"another CA", other, srv.CertPEM, "ovn-central", nil, nil, now, true},
		{"another name", ca, srv.CertPEM, "ovn-central", []string{"ovn-sb"}, nil, now, true},
		{"another IP", ca, srv.CertPEM, "ovn-central", nil, []net.IP{net.ParseIP("10.43.0.42")}, now, true},
		{"another CN", ca, srv.CertPEM, "northd", nil, nil, now, true},
		{"near its end", ca, srv.CertPEM, "ovn-central", nil, nil, now.Add(LeafLifetime*2/3 + 2*time.Hour), true},
		{"before the window", ca, srv.CertPEM, "ovn-central", nil, nil, now.Add(LeafLifetime*2/3 - 2*time.Hour), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Due(tt.ca, tt.cert, tt.cn, tt.names, tt.ips, tt.at); got != tt.want {
				t.Errorf("Due() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestValidChassisName(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want bool
	}{
		{"0b5e6f3c-2d1e-4c8a-9f7b-1a2b3c4d5e6f", true},
		{"node1", true},
		{"node1.example.com", true},
		{"", false},
		{"-x", false},
		{"a/b", false},
		{"a b", false},
		{"CN=x,O=y", false},
		{"a\nb", false},
	} {
		t.Run(tt.in, func(t *testing.T) {
			if got := ValidChassisName(tt.in) == nil; got != tt.want {
				t.Errorf("ValidChassisName(%q) ok = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}
