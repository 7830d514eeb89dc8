package cluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/client"
	"github.com/osdcloud/osd/daemon/rest"
	"github.com/osdcloud/osd/daemon/store"
)

// testCluster is a real HTTPS API on 127.0.0.1: the cluster endpoints plus one protected
// endpoint, the listener guard, router and authorizer the daemon uses, and SQLite in
// memory. Only its Kubernetes is a stand-in (the agent credential and admission record
// what they were asked): the real one is exercised by the two-node test.
type testCluster struct {
	svc      *Service
	hooks    *testHooks
	ca       *CA
	db       *store.DB
	addr     string
	guard    *Guard
	admitted chan string
}

// testHooks are the test cluster's Kubernetes and host: each func, when set, answers its
// hook; NoHooks answers the others.
type testHooks struct {
	NoHooks
	agent       func(ctx context.Context, name string) (AgentCredential, error)
	admit       func(ctx context.Context, name string, roles []string) error
	hostname    func() string
	local       func() *api.Member
	signChassis func(ctx context.Context, member, systemID, csrPEM string) ([]byte, []byte, error)
}

func (h *testHooks) AgentCredential(ctx context.Context, name string) (AgentCredential, error) {
	if h.agent != nil {
		return h.agent(ctx, name)
	}
	return h.NoHooks.AgentCredential(ctx, name)
}

func (h *testHooks) Admit(ctx context.Context, name string, roles []string) error {
	if h.admit != nil {
		return h.admit(ctx, name, roles)
	}
	return nil
}

func (h *testHooks) Hostname() string {
	if h.hostname != nil {
		return h.hostname()
	}
	return h.NoHooks.Hostname()
}

func (h *testHooks) Local() *api.Member {
	if h.local != nil {
		return h.local()
	}
	return nil
}

func (h *testHooks) SignChassis(ctx context.Context, member, systemID, csrPEM string) ([]byte, []byte, error) {
	if h.signChassis != nil {
		return h.signChassis(ctx, member, systemID, csrPEM)
	}
	return h.NoHooks.SignChassis(ctx, member, systemID, csrPEM)
}

// testAccess is Access plus the protected test route, for operators only.
var testAccess = func() AccessTable {
	t := AccessTable{{Method: "GET", Path: "protected"}: {RoleOperator}}
	for r, roles := range Access {
		t[r] = roles
	}
	return t
}()

func startCluster(t testing.TB) *testCluster {
	return startClusterWith(t, DefaultGuardLimits)
}

func startClusterWith(t testing.TB, limits GuardLimits) *testCluster {
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
	tc := &testCluster{ca: ca, db: db, addr: l.Addr().String(), admitted: make(chan string, 16)}
	tc.hooks = &testHooks{
		agent: func(_ context.Context, name string) (AgentCredential, error) {
			return AgentCredential{ServerURL: "https://127.0.0.1:6443", Token: "K10hash::abcdef.0123456789abcdef", Expires: time.Now().Add(time.Minute)}, nil
		},
		admit: func(_ context.Context, name string, roles []string) error {
			tc.admitted <- name + " " + strings.Join(roles, ",")
			return nil
		},
	}
	tc.svc = New(Config{DB: db, CA: ca, Trust: trust, Addresses: func() []string { return []string{tc.addr} }}, tc.hooks)
	endpoints := append(tc.svc.Endpoints(), rest.Endpoint{Path: "protected", Get: rest.Action{Handler: func(*http.Request) rest.Response {
		return rest.SyncResponse(map[string]string{"answer": "42"})
	}}})
	router := rest.NewRouter(endpoints, rest.WithAuthorizer(Authorizer(trust, testAccess, limits)), rest.WithHiddenInternalErrors())
	tc.guard = NewGuard(l, ServerTLSConfig(cert), trust, limits)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rest.Serve(ctx, tc.guard, router, rest.WithConnState(tc.guard.ConnState)) }()
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
	cfg, err := ClientTLSConfigFor(tc.ca.Fingerprint(), tc.addr, cert)
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
	if err := tc.svc.trust.Load(context.Background(), tc.db); err != nil {
		t.Fatal(err)
	}
	return cert
}

// join issues a token for name with roles (as an operator) and joins with it over HTTPS
// the way a joining daemon does; it returns the member's identity, saved under dir.
func (tc *testCluster) join(t testing.TB, name, dir string, roles ...string) *MemberIdentity {
	t.Helper()
	j := tc.issueJoin(t, name, roles...)
	creds, addr, err := j.first("")
	if err != nil {
		t.Fatalf("RequestJoin(%s) = %v", name, err)
	}
	id, err := SaveMemberIdentity(dir, j.tok.Fingerprint, creds.CACertPEM, creds.MemberCertPEM, j.key.Key)
	if err != nil {
		t.Fatalf("SaveMemberIdentity(%s) = %v", name, err)
	}
	req := j.request("")
	req.CSR = ""
	if _, err := CompleteJoinWith(context.Background(), j.tok.Fingerprint, addr, id.Cert, req); err != nil {
		t.Fatalf("CompleteJoinWith(%s) = %v", name, err)
	}
	return id
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

// stubRouter serves testAccess's routes over the real guard, router and authorizer with
// handlers that only say they were reached, so that what the authorizer lets through is
// seen route by route, whatever the handlers would have decided.
func (tc *testCluster) stubRouter(t testing.TB, table AccessTable) string {
	t.Helper()
	byPath := map[string]*rest.Endpoint{}
	var order []string
	for r := range table {
		ep := byPath[r.Path]
		if ep == nil {
			ep = &rest.Endpoint{Path: r.Path}
			byPath[r.Path] = ep
			order = append(order, r.Path)
		}
		a := rest.Action{Handler: func(*http.Request) rest.Response { return rest.SyncResponse("reached") }}
		switch r.Method {
		case http.MethodGet:
			ep.Get = a
		case http.MethodPost:
			ep.Post = a
		case http.MethodDelete:
			ep.Delete = a
		case http.MethodPut:
			ep.Put = a
		case http.MethodPatch:
			ep.Patch = a
		}
	}
	var eps []rest.Endpoint
	for _, p := range order {
		eps = append(eps, *byPath[p])
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := EnsureServerCert(tc.ca, t.TempDir(), nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	limits := DefaultGuardLimits
	limits.MaxAnonymousPerSource = limits.MaxAnonymous // one client makes every request here
	g := NewGuard(l, ServerTLSConfig(cert), tc.svc.trust, limits)
	router := rest.NewRouter(eps, rest.WithAuthorizer(Authorizer(tc.svc.trust, table, GuardLimits{})))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rest.Serve(ctx, g, router, rest.WithConnState(g.ConnState)) }()
	t.Cleanup(func() { cancel(); <-done })
	return l.Addr().String()
}

// roleCerts makes a certificate for every role: an operator's, a joined member's, a
// removed member's, and for anyone: none, an untrusted one and a CA-signed member
// certificate that never joined.
func (tc *testCluster) roleCerts(t testing.TB) map[string]struct {
	role Role
	cert *tls.Certificate
} {
	t.Helper()
	k, _ := NewMemberKey("node5")
	unregPEM, err := IssueMemberCert(tc.ca, "node5", &k.Key.PublicKey, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	unreg := chainOf(t, unregPEM, k)
	untrusted, _ := selfSigned(t, "stranger")
	member := tc.join(t, "node2", t.TempDir(), "compute")
	removed := tc.join(t, "node3", t.TempDir(), "compute")
	if err := tc.svc.RemoveMember(context.Background(), "node3"); err != nil {
		t.Fatal(err)
	}
	return map[string]struct {
		role Role
		cert *tls.Certificate
	}{
		"no certificate":      {RoleAnyone, nil},
		"untrusted":           {RoleAnyone, untrusted},
		"unregistered member": {RoleAnyone, unreg},
		"operator":            {RoleOperator, tc.trustedClient(t, "automation")},
		"member":              {RoleMember, &member.Cert},
		"removed member":      {RoleRemoved, &removed.Cert},
	}
}

func chainOf(t testing.TB, certPEM []byte, k *MemberKey) *tls.Certificate {
	t.Helper()
	kd, _ := x509.MarshalECPrivateKey(k.Key)
	pair, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}))
	if err != nil {
		t.Fatal(err)
	}
	return &pair
}

// TestAccessByRole goes through the access table route by route and role by role over
// real HTTPS: a caller reaches a route exactly when the table lets its role in; every
// refusal is 401 (no certificate) or 403.
func TestAccessByRole(t *testing.T) {
	tc := startCluster(t)
	ctx := context.Background()
	certs := tc.roleCerts(t)
	addr := tc.stubRouter(t, testAccess)
	for route, allowed := range testAccess {
		for who, c := range certs {
			cfg, err := ClientTLSConfigFor(tc.ca.Fingerprint(), addr, c.cert)
			if err != nil {
				t.Fatal(err)
			}
			hc := NewHTTPClient(cfg)
			cl := client.New("https://"+addr, hc)
			path := strings.NewReplacer("{name}", "node2", "{fingerprint}", testFP).Replace(route.Path)
			var got string
			err = cl.Query(ctx, route.Method, path, map[string]string{}, &got)
			hc.CloseIdleConnections()
			want := slices.Contains(allowed, c.role) || slices.Contains(allowed, RoleAnyone)
			switch {
			case want && (err != nil || got != "reached"):
				t.Errorf("%s as %s = %v, want it reached", route, who, err)
			case !want && err == nil:
				t.Errorf("%s as %s reached the handler, want it refused (allowed: %v)", route, who, allowed)
			case !want && statusOf(err) != http.StatusUnauthorized && statusOf(err) != http.StatusForbidden:
				t.Errorf("%s as %s = %v, want 401 or 403", route, who, err)
			}
		}
	}
	// What the issue names: a member certificate may not manage trust, tokens or members.
	for _, r := range []rest.Route{{Method: "POST", Path: "trust"}, {Method: "POST", Path: "cluster/tokens"},
		{Method: "DELETE", Path: "cluster/members/{name}"}, {Method: "DELETE", Path: "trust/{fingerprint}"}} {
		if testAccess.Allows(r, RoleMember) {
			t.Errorf("access table lets members call %s", r)
		}
	}
}

func TestHTTPSAuthorization(t *testing.T) {
	tc := startCluster(t)
	ctx := context.Background()
	untrusted, _ := selfSigned(t, "stranger")
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
		{"trusted client", trusted, http.MethodGet, "protected", nil, http.StatusOK, ""},
		// Unknown name and wrong secret answer alike: names cannot be probed.
		{"join with an unknown name", nil, http.MethodPost, "cluster/join",
			api.JoinRequest{Name: "node2", Secret: "x", Address: "127.0.0.1:1", CSR: mustCSR(t, "node2")}, http.StatusUnauthorized, "the join token for node2 is not valid"},
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
	if ms, _ := tc.db.ListMembers(ctx); len(ms) != 0 {
		t.Errorf("members after refused requests = %+v, want none", ms)
	}
}

func TestJoinOverHTTPS(t *testing.T) {
	tc := startCluster(t)
	ctx := context.Background()
	admin := tc.client(t, tc.trustedClient(t, "admin"))

	var issued api.IssuedToken
	if err := admin.Query(ctx, http.MethodPost, "cluster/tokens", api.TokenRequest{Name: "node2", Roles: []string{"network", "compute"}, TTL: "10m"}, &issued); err != nil {
		t.Fatalf("POST cluster/tokens = %v, want nil", err)
	}
	if strings.Join(issued.Roles, ",") != "compute,network" {
		t.Errorf("issued token roles = %v, want compute,network", issued.Roles)
	}
	tok, err := DecodeToken(issued.Token)
	if err != nil {
		t.Fatalf("DecodeToken(issued) = %v, want nil", err)
	}
	if tok.Fingerprint != tc.ca.Fingerprint() || len(tok.Addresses) != 1 || tok.Addresses[0] != tc.addr {
		t.Fatalf("token = %+v, want the CA fingerprint and %s", tok, tc.addr)
	}
	if err := admin.Query(ctx, http.MethodPost, "cluster/tokens", api.TokenRequest{Name: "node2"}, nil); statusOf(err) != http.StatusConflict {
		t.Errorf("POST cluster/tokens for node2 again = %v, want 409", err)
	}
	key, err := NewMemberKey("node2")
	if err != nil {
		t.Fatal(err)
	}
	req := api.JoinRequest{Name: tok.Name, Secret: tok.Secret, Address: "127.0.0.2:7443", CSR: key.CSRPEM}

	// Refused joins store nothing and leave the token usable; a forged secret is told
	// exactly what an unknown name is.
	bad := req
	bad.Secret, _ = newSecret()
	if _, _, err := RequestJoin(ctx, tok, bad); statusOf(err) != http.StatusUnauthorized || !strings.Contains(err.Error(), "is not valid") {
		t.Errorf("RequestJoin(forged secret) = %v, want 401 not valid", err)
	}
	// A joiner killed after receiving its credentials retries with the same token.
	var creds api.JoinResponse
	for attempt := range 2 {
		var addr string
		creds, addr, err = RequestJoin(ctx, tok, req)
		if err != nil || addr != tc.addr {
			t.Fatalf("RequestJoin() attempt %d = %v, %s, want nil, %s", attempt, err, addr, tc.addr)
		}
	}
	if creds.K3sServerURL != "https://127.0.0.1:6443" || !strings.HasSuffix(creds.K3sToken, "::abcdef.0123456789abcdef") ||
		creds.CACertPEM != string(tc.ca.CertPEM) || strings.Join(creds.Roles, ",") != "compute,network" {
		t.Errorf("RequestJoin() = %+v, want the agent credential, the CA and the token's roles", creds)
	}
	if ms, _ := tc.db.ListMembers(ctx); len(ms) != 0 {
		t.Fatalf("members before completion = %+v, want none", ms)
	}

	// The joiner keeps its credentials only if the CA is the one its token pinned.
	if _, err := SaveMemberIdentity(t.TempDir(), mustCA(t).Fingerprint(), creds.CACertPEM, creds.MemberCertPEM, key.Key); !errors.Is(err, ErrPinMismatch) {
		t.Errorf("SaveMemberIdentity(another pin) = %v, want ErrPinMismatch", err)
	}
	otherKey, _ := NewMemberKey("node2")
	if _, err := SaveMemberIdentity(t.TempDir(), tok.Fingerprint, creds.CACertPEM, creds.MemberCertPEM, otherKey.Key); err == nil {
		t.Error("SaveMemberIdentity(certificate for another key) = nil, want an error")
	}
	dir := filepath.Join(t.TempDir(), "identity")
	id, err := SaveMemberIdentity(dir, tok.Fingerprint, creds.CACertPEM, creds.MemberCertPEM, key.Key)
	if err != nil {
		t.Fatalf("SaveMemberIdentity() = %v, want nil", err)
	}
	checkMode(t, filepath.Join(dir, memberPairFile), 0o600)

	// Completion needs the member certificate as the client certificate.
	req.CSR = ""
	if err := tc.client(t, nil).Query(ctx, http.MethodPost, "cluster/join/complete", req, nil); statusOf(err) != http.StatusUnauthorized {
		t.Errorf("complete without a certificate = %v, want 401", err)
	}
	stranger, _ := selfSigned(t, "node2")
	if err := tc.client(t, stranger).Query(ctx, http.MethodPost, "cluster/join/complete", req, nil); statusOf(err) != http.StatusForbidden {
		t.Errorf("complete with a self-signed certificate = %v, want 403", err)
	}
	m, err := CompleteJoinWith(ctx, tok.Fingerprint, tc.addr, id.Cert, req)
	if err != nil {
		t.Fatalf("CompleteJoinWith() = %v, want nil", err)
	}
	if m.Name != "node2" || strings.Join(m.Roles, ",") != "compute,network" || m.Address != "127.0.0.2:7443" {
		t.Errorf("CompleteJoinWith() = %+v, want node2 with roles compute,network", m)
	}
	if got := <-tc.admitted; got != "node2 compute,network" {
		t.Errorf("admitted %q, want node2 with its token's roles", got)
	}
	// A lost answer: completing again with the same certificate gives the same member.
	if again, err := CompleteJoinWith(ctx, tok.Fingerprint, tc.addr, id.Cert, req); err != nil || again.Fingerprint != m.Fingerprint {
		t.Errorf("CompleteJoinWith() again = %+v, %v, want the same member", again, err)
	}
	<-tc.admitted
	// The token is spent now: the same token twice, against the server, is refused.
	if _, _, err := RequestJoin(ctx, tok, api.JoinRequest{Name: tok.Name, Secret: tok.Secret, Address: "127.0.0.2:7443", CSR: mustCSR(t, "node2")}); statusOf(err) != http.StatusForbidden || !strings.Contains(err.Error(), "already used") {
		t.Errorf("RequestJoin() after completion = %v, want 403 already used", err)
	}

	loaded, err := LoadMemberIdentity(dir)
	if err != nil || Fingerprint(loaded.CA) != tc.ca.Fingerprint() || Fingerprint(loaded.Cert.Leaf) != m.Fingerprint {
		t.Fatalf("LoadMemberIdentity() = %v, want the CA and node2's certificate", err)
	}
	memberClient := tc.client(t, &loaded.Cert)
	var members []api.Member
	if err := memberClient.Query(ctx, http.MethodGet, "cluster/members", nil, &members); err != nil || len(members) != 1 {
		t.Fatalf("GET cluster/members as the member = %+v, %v, want node2", members, err)
	}
	held := map[string]string{"ovn": "sha256:" + strings.Repeat("1", 64)}
	if err := SendHeartbeat(ctx, loaded, tc.addr, "node2", "v1", held); err != nil {
		t.Errorf("SendHeartbeat(node2) = %v, want nil", err)
	}
	if err := memberClient.Query(ctx, http.MethodPost, "cluster/members/node9/heartbeat", nil, nil); statusOf(err) != http.StatusForbidden {
		t.Errorf("POST heartbeat for node9 as node2 = %v, want 403", err)
	}
	if err := admin.Query(ctx, http.MethodPost, "cluster/members/node2/heartbeat", nil, nil); statusOf(err) != http.StatusForbidden {
		t.Errorf("POST heartbeat for node2 as admin = %v, want 403", err)
	}
	var got api.Member
	if err := admin.Query(ctx, http.MethodGet, "cluster/members/node2", nil, &got); err != nil || got.LastHeartbeat == nil || got.Version != "v1" ||
		got.HeldImages["ovn"] != held["ovn"] {
		t.Errorf("GET cluster/members/node2 = %+v, %v, want a heartbeat time, version v1 and the images it holds", got, err)
	}
	var trust []api.TrustEntry
	if err := admin.Query(ctx, http.MethodGet, "trust", nil, &trust); err != nil || len(trust) != 2 {
		t.Errorf("GET trust = %+v, %v, want admin and node2", trust, err)
	}
	if err := admin.Query(ctx, http.MethodDelete, "trust/"+m.Fingerprint, nil, nil); statusOf(err) != http.StatusConflict {
		t.Errorf("DELETE trust/<member> = %v, want 409 (remove the member instead)", err)
	}

	// Removal revokes the member certificate even though the CA signed it, and the
	// removed node is told so explicitly at its next heartbeat.
	if err := tc.svc.RemoveMember(ctx, "node2"); err != nil {
		t.Fatal(err)
	}
	if err := memberClient.Query(ctx, http.MethodGet, "cluster/members", nil, nil); statusOf(err) != http.StatusForbidden {
		t.Errorf("GET cluster/members as a removed member = %v, want 403", err)
	}
	if err := SendHeartbeat(ctx, loaded, tc.addr, "node2", "v1", nil); !errors.Is(err, ErrRemoved) {
		t.Errorf("SendHeartbeat(removed node2) = %v, want ErrRemoved", err)
	}
}

// TestHeartbeatNeverSaysRemovedByMistake: a member whose certificate expired, or one the
// cluster never knew, is refused, but never told it was removed.
func TestHeartbeatNeverSaysRemovedByMistake(t *testing.T) {
	tc := startCluster(t)
	ctx := context.Background()
	id := tc.join(t, "node2", t.TempDir(), "compute")
	// The same member's key, certified again by the CA but never registered.
	k, _ := NewMemberKey("node2")
	strangerPEM, _ := IssueMemberCert(tc.ca, "node2", &k.Key.PublicKey, time.Now(), time.Hour)
	stranger := &MemberIdentity{CA: id.CA, Cert: *chainOf(t, strangerPEM, k)}
	if err := SendHeartbeat(ctx, stranger, tc.addr, "node2", "v1", nil); err == nil || errors.Is(err, ErrRemoved) || statusOf(errors.Unwrap(err)) == http.StatusGone {
		t.Errorf("SendHeartbeat(unknown certificate) = %v, want a refusal that is not ErrRemoved", err)
	}
	// An expired certificate of the real member.
	expiredPEM, _ := IssueMemberCert(tc.ca, "node2", &k.Key.PublicKey, time.Now().Add(-2*time.Hour), time.Hour)
	expired := &MemberIdentity{CA: id.CA, Cert: *chainOf(t, expiredPEM, k)}
	if err := SendHeartbeat(ctx, expired, tc.addr, "node2", "v1", nil); err == nil || errors.Is(err, ErrRemoved) {
		t.Errorf("SendHeartbeat(expired certificate) = %v, want a refusal that is not ErrRemoved", err)
	}
	if err := SendHeartbeat(ctx, id, tc.addr, "node2", "v1", nil); err != nil {
		t.Errorf("SendHeartbeat(node2) = %v, want nil", err)
	}
}

// TestMemberCertRenewal: a member renews its certificate over the API; the old one stays
// trusted until the new one is used, then goes; only the member itself may renew.
func TestMemberCertRenewal(t *testing.T) {
	tc := startCluster(t)
	ctx := context.Background()
	dir := t.TempDir()
	id := tc.join(t, "node2", dir, "compute")
	other := tc.join(t, "node4", t.TempDir(), "compute")
	old := Fingerprint(id.Cert.Leaf)
	renewed, err := RenewMemberCert(ctx, dir, id, tc.addr, "node2")
	if err != nil {
		t.Fatalf("RenewMemberCert(node2) = %v, want nil", err)
	}
	if Fingerprint(renewed.Cert.Leaf) == old {
		t.Fatal("RenewMemberCert() kept the old certificate")
	}
	if loaded, err := LoadMemberIdentity(dir); err != nil || Fingerprint(loaded.Cert.Leaf) != Fingerprint(renewed.Cert.Leaf) {
		t.Errorf("LoadMemberIdentity() after renewal = %v, want the new certificate", err)
	}
	// The answer might have been lost: the old certificate still works ...
	if err := SendHeartbeat(ctx, id, tc.addr, "node2", "v1", nil); err != nil {
		t.Errorf("heartbeat with the old certificate before the new one was used = %v, want nil", err)
	}
	// ... until the new one is used.
	if err := SendHeartbeat(ctx, renewed, tc.addr, "node2", "v1", nil); err != nil {
		t.Fatalf("heartbeat with the renewed certificate = %v, want nil", err)
	}
	if err := SendHeartbeat(ctx, id, tc.addr, "node2", "v1", nil); err == nil {
		t.Error("heartbeat with the old certificate after the new one was used = nil, want a refusal")
	}
	if _, err := RenewMemberCert(ctx, t.TempDir(), other, tc.addr, "node2"); statusOf(errors.Unwrap(err)) != http.StatusForbidden {
		t.Errorf("node4 renewing node2's certificate = %v, want 403", err)
	}
	var m api.Member
	if err := tc.client(t, tc.trustedClient(t, "admin")).Query(ctx, http.MethodGet, "cluster/members/node2", nil, &m); err != nil || m.Fingerprint != Fingerprint(renewed.Cert.Leaf) {
		t.Errorf("GET cluster/members/node2 = %+v, %v, want the renewed fingerprint", m, err)
	}
}

// TestClientPinning runs a man in the middle with another CA: the joiner must refuse it
// during the handshake, so the MITM never sees a request (or the secret inside it). A
// server certificate of the right CA for another name or address is refused too.
func TestClientPinning(t *testing.T) {
	tc := startCluster(t)
	ctx := context.Background()

	serve := func(cert tls.Certificate) (string, *atomic.Int64) {
		var seen atomic.Int64
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen.Add(1)
			w.WriteHeader(http.StatusOK)
		})}
		go srv.Serve(tls.NewListener(l, ServerTLSConfig(cert)))
		t.Cleanup(func() { srv.Close() })
		return l.Addr().String(), &seen
	}
	mitmDir := t.TempDir()
	mitmCA, err := EnsureCA(mitmDir)
	if err != nil {
		t.Fatal(err)
	}
	mitmCert, err := EnsureServerCert(mitmCA, mitmDir, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	mitm, seen := serve(mitmCert)
	// The cluster's own CA, but a certificate for another address (what a stolen server
	// certificate of another host would be).
	elsewhere, err := EnsureServerCert(tc.ca, t.TempDir(), []string{"elsewhere"}, []net.IP{net.IPv4(10, 9, 9, 9)})
	if err != nil {
		t.Fatal(err)
	}
	misnamed, seenMisnamed := serve(elsewhere)

	var admin api.IssuedToken
	if err := tc.client(t, tc.trustedClient(t, "admin")).Query(ctx, http.MethodPost, "cluster/tokens", api.TokenRequest{Name: "node2"}, &admin); err != nil {
		t.Fatal(err)
	}
	tok, err := DecodeToken(admin.Token)
	if err != nil {
		t.Fatal(err)
	}
	req := api.JoinRequest{Name: tok.Name, Secret: tok.Secret, Address: "127.0.0.3:7443", CSR: mustCSR(t, "node2")}

	for _, bad := range []string{mitm, misnamed} {
		one := tok
		one.Addresses = []string{bad}
		if _, _, err := RequestJoin(ctx, one, req); !errors.Is(err, ErrPinMismatch) {
			t.Fatalf("RequestJoin(%s only) = %v, want ErrPinMismatch", bad, err)
		}
	}
	if n, m := seen.Load(), seenMisnamed.Load(); n != 0 || m != 0 {
		t.Fatalf("impostors saw %d and %d requests, want 0", n, m)
	}

	// The impostors first, the real cluster last: the joiner skips them and joins.
	all := tok
	all.Addresses = []string{mitm, misnamed, tc.addr}
	if _, addr, err := RequestJoin(ctx, all, req); err != nil || addr != tc.addr {
		t.Fatalf("RequestJoin(MITM, misnamed, real) = %s, %v, want %s, nil", addr, err, tc.addr)
	}
	if n, m := seen.Load(), seenMisnamed.Load(); n != 0 || m != 0 {
		t.Fatalf("impostors saw %d and %d requests, want 0", n, m)
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
	serverCert := func(ca *CA, names []string, ips []net.IP) *x509.Certificate {
		pair, err := EnsureServerCert(ca, t.TempDir(), names, ips)
		if err != nil {
			t.Fatal(err)
		}
		return pair.Leaf
	}
	leaf := serverCert(ca, []string{"node1"}, []net.IP{net.IPv4(10, 0, 0, 1)})
	forged := serverCert(other, []string{"node1"}, []net.IP{net.IPv4(10, 0, 0, 1)})
	k, _ := NewMemberKey("node1")
	memberPEM, _ := IssueMemberCert(ca, "node1", &k.Key.PublicKey, time.Now(), time.Hour)
	member, _ := ParseCertPEM(memberPEM)
	now := time.Now()
	cases := []struct {
		name  string
		chain []*x509.Certificate
		host  string
		ok    bool
	}{
		{"leaf and pinned CA, by address", []*x509.Certificate{leaf, ca.Cert}, "10.0.0.1", true},
		{"leaf and pinned CA, by name", []*x509.Certificate{leaf, ca.Cert}, "node1", true},
		{"another address", []*x509.Certificate{leaf, ca.Cert}, "10.0.0.2", false},
		{"another name", []*x509.Certificate{leaf, ca.Cert}, "node2", false},
		{"a member certificate posing as the server", []*x509.Certificate{member, ca.Cert}, "node1", false},
		{"no certificates", nil, "node1", false},
		{"leaf without the CA", []*x509.Certificate{leaf}, "node1", false},
		{"other CA's leaf", []*x509.Certificate{forged, other.Cert}, "node1", false},
		{"other CA's leaf next to the pinned CA", []*x509.Certificate{forged, ca.Cert}, "node1", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := verifyPinned(c.chain, ca.Fingerprint(), c.host, now)
			if (err == nil) != c.ok {
				t.Errorf("verifyPinned(%s) = %v, want ok %v", c.name, err, c.ok)
			}
			if err != nil && !errors.Is(err, ErrPinMismatch) {
				t.Errorf("verifyPinned(%s) = %v, want ErrPinMismatch", c.name, err)
			}
		})
	}
	if _, err := ClientTLSConfig("nothex", "node1", nil); err == nil {
		t.Error("ClientTLSConfig(bad pin) = nil error, want one")
	}
	if _, err := ClientTLSConfig(ca.Fingerprint(), "", nil); err == nil {
		t.Error("ClientTLSConfig(no host) = nil error, want one")
	}
}

func TestIdentify(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	now := time.Now()
	clientCert, clientPEM := selfSigned(t, "ci")
	if _, err := AddTrust(ctx, db, "ci", clientPEM, TrustKindClient, now); err != nil {
		t.Fatal(err)
	}
	memberCert, memberPEM := selfSigned(t, "node2")
	if err := db.InsertToken(ctx, store.TokenRecord{Name: "node2", SecretHash: "h", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	fp := Fingerprint(memberCert.Leaf)
	if err := db.CompleteJoin(ctx, store.MemberRecord{Name: "node2", Address: "a:1", Fingerprint: fp, JoinedAt: now},
		store.TrustRecord{Fingerprint: fp, Name: "node2", Kind: TrustKindMember, CertPEM: string(memberPEM), AddedAt: now}, now); err != nil {
		t.Fatal(err)
	}
	var set TrustSet
	if err := set.Load(ctx, db); err != nil {
		t.Fatal(err)
	}
	stranger, _ := selfSigned(t, "x")
	cases := []struct {
		name string
		cert *x509.Certificate
		at   time.Time
		want Caller
	}{
		{"none", nil, now, Caller{Role: RoleAnyone}},
		{"stranger", stranger.Leaf, now, Caller{Role: RoleAnyone, Fingerprint: Fingerprint(stranger.Leaf)}},
		{"operator", clientCert.Leaf, now, Caller{Role: RoleOperator, Name: "ci", Fingerprint: Fingerprint(clientCert.Leaf)}},
		{"operator, expired", clientCert.Leaf, now.Add(48 * time.Hour), Caller{Role: RoleAnyone, Fingerprint: Fingerprint(clientCert.Leaf)}},
		{"operator, not yet valid", clientCert.Leaf, now.Add(-2 * time.Hour), Caller{Role: RoleAnyone, Fingerprint: Fingerprint(clientCert.Leaf)}},
		{"member", memberCert.Leaf, now, Caller{Role: RoleMember, Name: "node2", Fingerprint: fp}},
	}
	for _, c := range cases {
		if got := set.Identify(c.cert, c.at); got != c.want {
			t.Errorf("Identify(%s) = %+v, want %+v", c.name, got, c.want)
		}
	}
	if err := db.RemoveMember(ctx, "node2", now); err != nil {
		t.Fatal(err)
	}
	if err := set.Load(ctx, db); err != nil {
		t.Fatal(err)
	}
	if got := set.Identify(memberCert.Leaf, now); got.Role != RoleRemoved || got.Name != "node2" {
		t.Errorf("Identify(removed member) = %+v, want removed node2", got)
	}
	if set.Trusted(fp) {
		t.Error("Trusted(removed member) = true, want false")
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
	ccfg, err := ClientTLSConfig(pin, "127.0.0.1", nil)
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

// TestChassisCertRoute: a member has its OVN chassis certificate signed over the API for
// itself only; what SignChassis refuses reaches the member as its status.
func TestChassisCertRoute(t *testing.T) {
	tc := startCluster(t)
	ctx := context.Background()
	id := tc.join(t, "node2", t.TempDir(), "compute")
	other := tc.join(t, "node4", t.TempDir(), "compute")
	var got []string
	tc.hooks.signChassis = func(ctx context.Context, member, systemID, csrPEM string) ([]byte, []byte, error) {
		got = append(got, member+"/"+systemID)
		if systemID == "taken" {
			return nil, nil, rest.Errorf(rest.ErrConflict, "chassis taken belongs to host node9")
		}
		return []byte("CERT"), []byte("CA"), nil
	}
	cert, ca, err := RequestChassisCert(ctx, id, tc.addr, "node2", "abc", "CSR")
	if err != nil || string(cert) != "CERT" || string(ca) != "CA" {
		t.Fatalf("RequestChassisCert(node2) = %q, %q, %v, want the signer's answer", cert, ca, err)
	}
	if _, _, err := RequestChassisCert(ctx, id, tc.addr, "node2", "taken", "CSR"); statusOf(errors.Unwrap(err)) != http.StatusConflict {
		t.Errorf("RequestChassisCert(taken) = %v, want 409", err)
	}
	if _, _, err := RequestChassisCert(ctx, other, tc.addr, "node2", "abc", "CSR"); statusOf(errors.Unwrap(err)) != http.StatusForbidden {
		t.Errorf("node4 asking for node2's chassis certificate = %v, want 403", err)
	}
	if strings.Join(got, " ") != "node2/abc node2/taken" {
		t.Errorf("SignChassis calls = %v, want node2/abc node2/taken (none for node4)", got)
	}
}
