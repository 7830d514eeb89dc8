package cluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/client"
	"github.com/osdcloud/osd/daemon/rest"
	"github.com/osdcloud/osd/daemon/store"
)

// testCluster is a real HTTPS API on 127.0.0.1: the cluster endpoints plus one protected
// endpoint, the router and authorizer the daemon uses, and SQLite in memory.
type testCluster struct {
	svc  *Service
	ca   *CA
	db   *store.DB
	addr string
}

func startCluster(t testing.TB) *testCluster {
	t.Helper()
	dir := t.TempDir()
	ca, err := EnsureCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := EnsureServerCert(ca, dir, []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	db := newDB(t)
	trust := &TrustSet{}
	if err := trust.Load(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tc := &testCluster{ca: ca, db: db, addr: l.Addr().String()}
	tc.svc = &Service{
		DB:    db,
		CA:    ca,
		Trust: trust,
		K3s: func(context.Context) (string, string, error) {
			return "https://127.0.0.1:6443", "K10::server:secret", nil
		},
		Addresses: func() []string { return []string{tc.addr} },
	}
	endpoints := append(tc.svc.Endpoints(), rest.Endpoint{Path: "protected", Get: rest.Action{Handler: func(*http.Request) rest.Response {
		return rest.SyncResponse(map[string]string{"answer": "42"})
	}}})
	router := rest.NewRouter(endpoints, rest.WithAuthorizer(Authorizer(trust.Trusted)), rest.WithHiddenInternalErrors())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rest.Serve(ctx, tls.NewListener(l, ServerTLSConfig(cert)), router) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve() = %v, want nil", err)
		}
	})
	return tc
}

// client returns an API client pinned to the cluster CA presenting cert (nil: none).
func (tc *testCluster) client(t testing.TB, cert *tls.Certificate) *client.Client {
	t.Helper()
	cfg, err := ClientTLSConfig(tc.ca.Fingerprint(), cert)
	if err != nil {
		t.Fatal(err)
	}
	hc := NewHTTPClient(cfg)
	t.Cleanup(hc.CloseIdleConnections)
	return client.New("https://"+tc.addr, hc)
}

// trustedClient returns a self-signed client certificate the cluster trusts.
func (tc *testCluster) trustedClient(t testing.TB, name string) *tls.Certificate {
	t.Helper()
	cert, certPEM := selfSigned(t, name)
	if _, err := AddTrust(context.Background(), tc.db, name, certPEM, TrustKindClient, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := tc.svc.Trust.Load(context.Background(), tc.db); err != nil {
		t.Fatal(err)
	}
	return cert
}

func selfSigned(t testing.TB, cn string) (*tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := encodePair(der, key)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &pair, certPEM
}

func statusOf(err error) int {
	var apiErr *client.Error
	if errors.As(err, &apiErr) {
		return apiErr.StatusCode
	}
	if err == nil {
		return http.StatusOK
	}
	return -1
}

func TestHTTPSAuthorization(t *testing.T) {
	tc := startCluster(t)
	ctx := context.Background()
	untrusted, _ := selfSigned(t, "stranger")
	memberPEM, memberKey, err := IssueMemberCert(tc.ca, "node5") // CA-signed, never registered
	if err != nil {
		t.Fatal(err)
	}
	unregistered, err := tls.X509KeyPair(memberPEM, memberKey)
	if err != nil {
		t.Fatal(err)
	}
	trusted := tc.trustedClient(t, "automation")

	cases := []struct {
		name    string
		cert    *tls.Certificate
		method  string
		path    string
		body    any
		status  int
		wantMsg string
	}{
		{"no client certificate", nil, http.MethodGet, "protected", nil, http.StatusUnauthorized, "client certificate is required"},
		{"untrusted self-signed", untrusted, http.MethodGet, "protected", nil, http.StatusForbidden, "is not trusted"},
		{"CA-signed but not a member", &unregistered, http.MethodGet, "protected", nil, http.StatusForbidden, "is not trusted"},
		{"trusted client", trusted, http.MethodGet, "protected", nil, http.StatusOK, ""},
		{"join without a certificate reaches the handler", nil, http.MethodPost, "cluster/join",
			JoinRequest{Name: "node2", Secret: "x", Address: "127.0.0.1:1"}, http.StatusUnauthorized, "no join token was issued for node2"},
		{"join with a malformed body", nil, http.MethodPost, "cluster/join", map[string]any{"name": "node2", "admin": true},
			http.StatusBadRequest, "unknown field"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := tc.client(t, c.cert).Query(ctx, c.method, c.path, c.body, nil)
			if got := statusOf(err); got != c.status {
				t.Fatalf("%s %s = %v (status %d), want %d", c.method, c.path, err, got, c.status)
			}
			if c.wantMsg != "" && !strings.Contains(err.Error(), c.wantMsg) {
				t.Errorf("%s %s = %q, want it to contain %q", c.method, c.path, err, c.wantMsg)
			}
		})
	}

	// Every cluster endpoint except the join endpoints refuses the anonymous and the untrusted.
	for _, ep := range tc.svc.Endpoints() {
		for method, action := range map[string]rest.Action{http.MethodGet: ep.Get, http.MethodPost: ep.Post,
			http.MethodPut: ep.Put, http.MethodPatch: ep.Patch, http.MethodDelete: ep.Delete} {
			if action.Handler == nil {
				continue
			}
			path := strings.NewReplacer("{name}", "node2", "{fingerprint}", testFP).Replace(ep.Path)
			if action.AllowUntrusted {
				if !strings.HasPrefix(ep.Path, "cluster/join") {
					t.Errorf("%s %s allows untrusted callers, want only the join endpoints to", method, ep.Path)
				}
				continue
			}
			for _, who := range []struct {
				cert *tls.Certificate
				want int
			}{{nil, http.StatusUnauthorized}, {untrusted, http.StatusForbidden}, {&unregistered, http.StatusForbidden}} {
				err := tc.client(t, who.cert).Query(ctx, method, path, map[string]string{}, nil)
				if got := statusOf(err); got != who.want {
					t.Errorf("%s %s (cert %v) = %v, want status %d", method, path, who.cert != nil, err, who.want)
				}
			}
		}
	}
	if ms, _ := tc.db.ListMembers(ctx); len(ms) != 0 {
		t.Errorf("members after refused requests = %+v, want none", ms)
	}
}

func TestJoinOverHTTPS(t *testing.T) {
	tc := startCluster(t)
	ctx := context.Background()
	admin := tc.client(t, tc.trustedClient(t, "admin"))

	var issued IssuedToken
	if err := admin.Query(ctx, http.MethodPost, "cluster/tokens", TokenRequest{Name: "node2", TTL: "10m"}, &issued); err != nil {
		t.Fatalf("POST cluster/tokens = %v, want nil", err)
	}
	tok, err := DecodeToken(issued.Token)
	if err != nil {
		t.Fatalf("DecodeToken(issued) = %v, want nil", err)
	}
	if tok.Fingerprint != tc.ca.Fingerprint() || len(tok.Addresses) != 1 || tok.Addresses[0] != tc.addr {
		t.Fatalf("token = %+v, want the CA fingerprint and %s", tok, tc.addr)
	}
	if err := admin.Query(ctx, http.MethodPost, "cluster/tokens", TokenRequest{Name: "node2"}, nil); statusOf(err) != http.StatusConflict {
		t.Errorf("POST cluster/tokens for node2 again = %v, want 409", err)
	}
	req := JoinRequest{Name: tok.Name, Secret: tok.Secret, Roles: []string{"network", "compute"}, Address: "127.0.0.2:7443"}

	// Refused joins store nothing and leave the token usable.
	bad := req
	bad.Secret, _ = newSecret()
	if _, _, err := RequestJoin(ctx, tok, bad); statusOf(err) != http.StatusUnauthorized {
		t.Errorf("RequestJoin(forged secret) = %v, want 401", err)
	}
	// A joiner killed after receiving its credentials retries with the same token.
	var creds JoinResponse
	for attempt := range 2 {
		var addr string
		creds, addr, err = RequestJoin(ctx, tok, req)
		if err != nil || addr != tc.addr {
			t.Fatalf("RequestJoin() attempt %d = %v, %s, want nil, %s", attempt, err, addr, tc.addr)
		}
	}
	if creds.K3sServerURL != "https://127.0.0.1:6443" || creds.K3sToken != "K10::server:secret" || creds.CACertPEM != string(tc.ca.CertPEM) {
		t.Errorf("RequestJoin() = %+v, want the k3s join information and the CA", creds)
	}
	if ms, _ := tc.db.ListMembers(ctx); len(ms) != 0 {
		t.Fatalf("members before completion = %+v, want none", ms)
	}

	// Completion needs the member certificate as the client certificate.
	if err := tc.client(t, nil).Query(ctx, http.MethodPost, "cluster/join/complete", req, nil); statusOf(err) != http.StatusUnauthorized {
		t.Errorf("complete without a certificate = %v, want 401", err)
	}
	stranger, _ := selfSigned(t, "node2")
	if err := tc.client(t, stranger).Query(ctx, http.MethodPost, "cluster/join/complete", req, nil); statusOf(err) != http.StatusForbidden {
		t.Errorf("complete with a self-signed certificate = %v, want 403", err)
	}
	m, err := CompleteJoin(ctx, tok, tc.addr, creds, req)
	if err != nil {
		t.Fatalf("CompleteJoin() = %v, want nil", err)
	}
	if m.Name != "node2" || strings.Join(m.Roles, ",") != "compute,network" || m.Address != "127.0.0.2:7443" {
		t.Errorf("CompleteJoin() = %+v, want node2 with roles compute,network", m)
	}
	// A lost answer: completing again with the same certificate gives the same member.
	if again, err := CompleteJoin(ctx, tok, tc.addr, creds, req); err != nil || again.Fingerprint != m.Fingerprint {
		t.Errorf("CompleteJoin() again = %+v, %v, want the same member", again, err)
	}
	// The token is spent now.
	if _, _, err := RequestJoin(ctx, tok, req); statusOf(err) != http.StatusForbidden || !strings.Contains(err.Error(), "already used") {
		t.Errorf("RequestJoin() after completion = %v, want 403 already used", err)
	}

	pair, err := tls.X509KeyPair([]byte(creds.MemberCertPEM), []byte(creds.MemberKeyPEM))
	if err != nil {
		t.Fatal(err)
	}
	memberClient := tc.client(t, &pair)
	var members []Member
	if err := memberClient.Query(ctx, http.MethodGet, "cluster/members", nil, &members); err != nil || len(members) != 1 {
		t.Fatalf("GET cluster/members as the member = %+v, %v, want node2", members, err)
	}
	if err := memberClient.Query(ctx, http.MethodPost, "cluster/members/node2/heartbeat", nil, nil); err != nil {
		t.Errorf("POST heartbeat as node2 = %v, want nil", err)
	}
	if err := admin.Query(ctx, http.MethodPost, "cluster/members/node2/heartbeat", nil, nil); statusOf(err) != http.StatusForbidden {
		t.Errorf("POST heartbeat for node2 as admin = %v, want 403", err)
	}
	var got Member
	if err := admin.Query(ctx, http.MethodGet, "cluster/members/node2", nil, &got); err != nil || got.LastHeartbeat == nil {
		t.Errorf("GET cluster/members/node2 = %+v, %v, want a heartbeat time", got, err)
	}

	// The joiner keeps its credentials and serves HTTPS with them; clients pin the CA.
	dir := filepath.Join(t.TempDir(), "identity")
	if _, err := SaveMemberIdentity(dir, creds); err != nil {
		t.Fatalf("SaveMemberIdentity() = %v, want nil", err)
	}
	checkMode(t, filepath.Join(dir, memberKeyFile), 0o600)
	id, err := LoadMemberIdentity(dir)
	if err != nil || Fingerprint(id.CA) != tc.ca.Fingerprint() || Fingerprint(id.Cert.Leaf) != m.Fingerprint {
		t.Fatalf("LoadMemberIdentity() = %v, want the CA and node2's certificate", err)
	}
	if fp := servedFingerprint(t, ServerTLSConfig(id.Cert), tc.ca.Fingerprint()); fp != m.Fingerprint {
		t.Errorf("member HTTPS certificate = %s, want %s", fp, m.Fingerprint)
	}
	forged := creds
	forged.CACertPEM = string(mustCA(t).CertPEM)
	if _, err := SaveMemberIdentity(t.TempDir(), forged); err == nil {
		t.Error("SaveMemberIdentity(certificate from another CA) = nil, want an error")
	}
	if _, err := LoadMemberIdentity(t.TempDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadMemberIdentity(empty dir) = %v, want os.ErrNotExist", err)
	}

	var trust []TrustEntry
	if err := admin.Query(ctx, http.MethodGet, "trust", nil, &trust); err != nil || len(trust) != 2 {
		t.Errorf("GET trust = %+v, %v, want admin and node2", trust, err)
	}
	if err := admin.Query(ctx, http.MethodDelete, "trust/"+m.Fingerprint, nil, nil); statusOf(err) != http.StatusConflict {
		t.Errorf("DELETE trust/<member> = %v, want 409 (remove the member instead)", err)
	}

	// Removal revokes the member certificate even though the CA signed it.
	if err := tc.svc.RemoveMember(ctx, "node2"); err != nil {
		t.Fatal(err)
	}
	if err := memberClient.Query(ctx, http.MethodGet, "protected", nil, nil); statusOf(err) != http.StatusForbidden {
		t.Errorf("GET protected as a removed member = %v, want 403", err)
	}
}

// TestClientPinning runs a man in the middle with another CA: the joiner must refuse it
// during the handshake, so the MITM never sees a request (or the secret inside it).
func TestClientPinning(t *testing.T) {
	tc := startCluster(t)
	ctx := context.Background()

	mitmDir := t.TempDir()
	mitmCA, err := EnsureCA(mitmDir)
	if err != nil {
		t.Fatal(err)
	}
	mitmCert, err := EnsureServerCert(mitmCA, mitmDir, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	var seen atomic.Int64
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		w.WriteHeader(http.StatusOK)
	}), ErrorLog: nil}
	go srv.Serve(tls.NewListener(l, ServerTLSConfig(mitmCert)))
	t.Cleanup(func() { srv.Close() })
	mitm := l.Addr().String()

	var admin IssuedToken
	if err := tc.client(t, tc.trustedClient(t, "admin")).Query(ctx, http.MethodPost, "cluster/tokens", TokenRequest{Name: "node2"}, &admin); err != nil {
		t.Fatal(err)
	}
	tok, err := DecodeToken(admin.Token)
	if err != nil {
		t.Fatal(err)
	}
	req := JoinRequest{Name: tok.Name, Secret: tok.Secret, Address: "127.0.0.3:7443"}

	onlyMITM := tok
	onlyMITM.Addresses = []string{mitm}
	_, _, err = RequestJoin(ctx, onlyMITM, req)
	if !errors.Is(err, ErrPinMismatch) {
		t.Fatalf("RequestJoin(MITM only) = %v, want ErrPinMismatch", err)
	}
	if n := seen.Load(); n != 0 {
		t.Fatalf("MITM handler saw %d requests, want 0", n)
	}

	// The MITM first, the real cluster second: the joiner skips the MITM and joins.
	both := tok
	both.Addresses = []string{mitm, tc.addr}
	if _, addr, err := RequestJoin(ctx, both, req); err != nil || addr != tc.addr {
		t.Fatalf("RequestJoin(MITM, real) = %s, %v, want %s, nil", addr, err, tc.addr)
	}
	if n := seen.Load(); n != 0 {
		t.Fatalf("MITM handler saw %d requests, want 0", n)
	}

	// Sanity: pinned to the MITM's own CA, the same client does reach it, so the
	// refusals above come from the pin.
	mitmTok := tok
	mitmTok.Fingerprint, mitmTok.Addresses = mitmCA.Fingerprint(), []string{mitm}
	_, _, _ = RequestJoin(ctx, mitmTok, req)
	if n := seen.Load(); n != 1 {
		t.Errorf("MITM handler with its own pin saw %d requests, want 1", n)
	}
}

func TestVerifyPinned(t *testing.T) {
	ca, other := mustCA(t), mustCA(t)
	leafPEM, _, err := IssueMemberCert(ca, "node1")
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := ParseCertPEM(leafPEM)
	forgedPEM, _, _ := IssueMemberCert(other, "node1")
	forged, _ := ParseCertPEM(forgedPEM)
	now := time.Now()
	cases := []struct {
		name  string
		chain []*x509.Certificate
		ok    bool
	}{
		{"leaf and pinned CA", []*x509.Certificate{leaf, ca.Cert}, true},
		{"no certificates", nil, false},
		{"leaf without the CA", []*x509.Certificate{leaf}, false},
		{"other CA's leaf", []*x509.Certificate{forged, other.Cert}, false},
		{"other CA's leaf next to the pinned CA", []*x509.Certificate{forged, ca.Cert}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := verifyPinned(c.chain, ca.Fingerprint(), now)
			if (err == nil) != c.ok {
				t.Errorf("verifyPinned(%s) = %v, want ok %v", c.name, err, c.ok)
			}
			if err != nil && !errors.Is(err, ErrPinMismatch) {
				t.Errorf("verifyPinned(%s) = %v, want ErrPinMismatch", c.name, err)
			}
		})
	}
	if _, err := ClientTLSConfig("nothex", nil); err == nil {
		t.Error("ClientTLSConfig(bad pin) = nil error, want one")
	}
}

func TestCheckClientCert(t *testing.T) {
	now := time.Now()
	_, pemValid := selfSigned(t, "c")
	valid, _ := ParseCertPEM(pemValid)
	yes := func(string) bool { return true }
	no := func(string) bool { return false }
	cases := []struct {
		name    string
		trusted func(string) bool
		now     time.Time
		status  int
	}{
		{"trusted", yes, now, http.StatusOK},
		{"untrusted", no, now, http.StatusForbidden},
		{"trusted but expired", yes, now.Add(48 * time.Hour), http.StatusForbidden},
		{"trusted but not yet valid", yes, now.Add(-2 * time.Hour), http.StatusForbidden},
	}
	for _, c := range cases {
		if got := rest.StatusFor(checkClientCert(valid, c.trusted, c.now)); got != c.status {
			t.Errorf("checkClientCert(%s) status = %d, want %d", c.name, got, c.status)
		}
	}
}

// servedFingerprint starts a TLS server on 127.0.0.1 with cfg, connects to it pinning pin,
// and returns the fingerprint of the leaf certificate it served.
func servedFingerprint(t *testing.T, cfg *tls.Config, pin string) string {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		_ = c.(*tls.Conn).Handshake()
		c.Close()
	}()
	ccfg, err := ClientTLSConfig(pin, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", l.Addr().String(), ccfg)
	if err != nil {
		t.Fatalf("tls.Dial(pinned %s) = %v, want nil", pin, err)
	}
	defer conn.Close()
	return Fingerprint(conn.ConnectionState().PeerCertificates[0])
}

func TestRenewingCert(t *testing.T) {
	dir := t.TempDir()
	ca, err := EnsureCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := NewRenewingCert(ca, dir, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatalf("NewRenewingCert() = %v, want nil", err)
	}
	if err := rc.renew(time.Now()); err != nil || rc.Certificate().Leaf.NotAfter.Sub(time.Now()) < 300*24*time.Hour {
		t.Fatalf("renew(now) = %v, want the fresh certificate kept", err)
	}
	// Replace it with one issued 340 days ago (25 days left), then renew "now".
	if err := os.Remove(filepath.Join(dir, serverCertFile)); err != nil {
		t.Fatal(err)
	}
	if err := rc.renew(time.Now().Add(-340 * 24 * time.Hour)); err != nil {
		t.Fatal(err)
	}
	first := Fingerprint(rc.Certificate().Leaf)
	cfg := rc.TLSConfig()
	if got := servedFingerprint(t, cfg, ca.Fingerprint()); got != first {
		t.Fatalf("served certificate = %s, want %s", got, first)
	}
	if err := rc.renew(time.Now()); err != nil {
		t.Fatal(err)
	}
	second := Fingerprint(rc.Certificate().Leaf)
	if second == first {
		t.Fatal("renew(25 days before expiry) kept the certificate, want a new one")
	}
	if got := servedFingerprint(t, cfg, ca.Fingerprint()); got != second {
		t.Errorf("served certificate after renewal = %s, want %s (same listener config)", got, second)
	}
}
