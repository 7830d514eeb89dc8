package daemon

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
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
	"github.com/osdcloud/osd/daemon/cluster"
	"github.com/osdcloud/osd/daemon/join"
	"github.com/osdcloud/osd/daemon/store"
)

// testDaemon runs a real daemon (store, unix socket, HTTPS on loopback) in a temp dir,
// changed by opts before it runs; nothing in these tests starts its Kubernetes.
func testDaemon(t *testing.T, name string, opts ...func(*Daemon)) (*Daemon, *client.Client) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the daemon needs root")
	}
	dir := t.TempDir()
	d, err := New(Config{StateDir: filepath.Join(dir, "state"), RunDir: filepath.Join(dir, "run"), CacheDir: filepath.Join(dir, "cache"),
		NodeName: name, NodeIP: "127.0.0.1", HTTPSAddress: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range opts {
		o(d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	select {
	case <-d.Ready():
	case err := <-done:
		t.Fatalf("Run() = %v before ready", err)
	case <-time.After(30 * time.Second):
		t.Fatal("daemon not ready after 30s")
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v, want nil at stop", err)
		}
	})
	return d, client.NewUnix(d.cfg.Socket)
}

// joinerState is everything a join could have left on the joining node.
func joinerState(t *testing.T, d *Daemon) []string {
	t.Helper()
	var left []string
	if h, err := d.st.Host(context.Background()); err != nil || h.Join != nil || h.TunnelInterface != "" {
		left = append(left, fmt.Sprintf("host record %+v, %v", h, err))
	}
	if p := join.IdentityDir(d.cfg); func() bool { _, err := os.Stat(p); return err == nil }() {
		left = append(left, p)
	}
	return left
}

// serverState is what the cluster side stores about members: members, trusted
// certificates and each token's state.
func serverState(t *testing.T, d *Daemon) string {
	t.Helper()
	ctx := context.Background()
	ms, err := d.st.DB.ListMembers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	trust, err := d.st.DB.ListTrust(ctx)
	if err != nil {
		t.Fatal(err)
	}
	toks, err := cluster.ListTokens(ctx, d.st.DB, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, m := range ms {
		b.WriteString("member " + m.Name + " " + m.Fingerprint + "\n")
	}
	for _, tr := range trust {
		b.WriteString("trust " + tr.Name + " " + tr.Fingerprint + "\n")
	}
	for _, tk := range toks {
		b.WriteString("token " + tk.Name + " " + tk.State + "\n")
	}
	return b.String()
}

// issue issues a fresh token for name (revoking the one it may hold).
func issue(t *testing.T, c *client.Client, name string) cluster.Token {
	t.Helper()
	revoke(t, c, name)
	var it api.IssuedToken
	if err := c.Query(context.Background(), http.MethodPost, "cluster/tokens", api.TokenRequest{Name: name}, &it); err != nil {
		t.Fatalf("issue token for %s: %v", name, err)
	}
	tok, err := cluster.DecodeToken(it.Token)
	if err != nil {
		t.Fatal(err)
	}
	return tok
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

// mitmServer is an HTTPS server with a CA of its own that counts the requests reaching it.
func mitmServer(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	dir := t.TempDir()
	ca, err := cluster.EnsureCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := cluster.EnsureServerCert(ca, dir, []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var seen atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen.Add(1) })}
	go srv.Serve(tls.NewListener(l, cluster.ServerTLSConfig(cert)))
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String(), &seen
}

// TestJoinRemoteRefusesBadTokens runs two real daemons (the cluster's and a joiner called
// node2) and has the joiner's API refuse every kind of bad token with a clear message,
// with nothing stored on either side afterwards. No Kubernetes runs: the cluster's k3s
// join information is faked for the one join that completes (to make a used token), and
// is not a usable URL, so a join that wrongly went ahead would stop before starting k3s.
func TestJoinRemoteRefusesBadTokens(t *testing.T) {
	srv, srvAPI := testDaemon(t, "node1", fakeKubernetes)
	joiner, joinAPI := testDaemon(t, "node2")
	ctx := context.Background()
	mitm, mitmSeen := mitmServer(t)
	otherCA, err := cluster.EnsureCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	forged := func(tok cluster.Token) cluster.Token {
		b := make([]byte, 32)
		rand.Read(b)
		tok.Secret = base64.RawURLEncoding.EncodeToString(b)
		return tok
	}

	cases := []struct {
		name    string
		token   func(t *testing.T) string
		status  int
		wantMsg string
	}{
		{"garbage", func(*testing.T) string { return "this is not a token!" }, http.StatusBadRequest, "not valid base64"},
		{"truncated", func(t *testing.T) string { s := issue(t, srvAPI, "node2").Encode(); return s[:len(s)/2] }, http.StatusBadRequest, "truncated"},
		{"expired (checked here)", func(t *testing.T) string {
			revoke(t, srvAPI, "node2")
			tok, err := cluster.Issue(ctx, srv.st.DB, "node2", nil, time.Minute, srv.remoteAddresses(), clusterCA(t, srv).Fingerprint(), time.Now().Add(-2*time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			return tok.Encode()
		}, http.StatusForbidden, "expired at"},
		{"expired (checked by the cluster)", func(t *testing.T) string {
			revoke(t, srvAPI, "node2")
			tok, err := cluster.Issue(ctx, srv.st.DB, "node2", nil, time.Minute, srv.remoteAddresses(), clusterCA(t, srv).Fingerprint(), time.Now().Add(-2*time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			tok.Expires = time.Now().Add(time.Hour) // edited by hand: the cluster's record decides
			return tok.Encode()
		}, http.StatusForbidden, "the cluster refused the join: the join token for node2 expired"},
		{"revoked", func(t *testing.T) string {
			tok := issue(t, srvAPI, "node2")
			revoke(t, srvAPI, "node2")
			return tok.Encode()
		}, http.StatusForbidden, "was revoked"},
		{"forged secret", func(t *testing.T) string { return forged(issue(t, srvAPI, "node2")).Encode() }, http.StatusUnauthorized, "the join token for node2 is not valid"},
		{"man in the middle (another CA at the token's address)", func(t *testing.T) string {
			tok := issue(t, srvAPI, "node2")
			tok.Addresses = []string{mitm}
			return tok.Encode()
		}, http.StatusForbidden, "does not match the pinned cluster fingerprint"},
		{"wrong fingerprint", func(t *testing.T) string {
			tok := issue(t, srvAPI, "node2")
			tok.Fingerprint = otherCA.Fingerprint()
			return tok.Encode()
		}, http.StatusForbidden, "does not match the pinned cluster fingerprint"},
		{"token for another node", func(t *testing.T) string { return issue(t, srvAPI, "node3").Encode() }, http.StatusBadRequest, "this join token is for node3, but this node is called node2"},
		{"another node's token renamed", func(t *testing.T) string {
			tok := issue(t, srvAPI, "node3")
			tok.Name = "node2"
			return tok.Encode()
		}, http.StatusForbidden, "this join token was issued for node3, not node2"},
		{"reused", func(t *testing.T) string {
			// A first join with this token completed (the test plays that joiner).
			tok := issue(t, srvAPI, "node2")
			joinAs(t, tok)
			return tok.Encode()
		}, http.StatusForbidden, "already used"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			token := c.token(t)
			before := serverState(t, srv)
			seenBefore := mitmSeen.Load()
			err := joinAPI.Query(ctx, http.MethodPost, "cluster/join-remote", api.JoinRemoteRequest{Token: token}, nil)
			if got := statusOf(err); got != c.status {
				t.Fatalf("POST cluster/join-remote = %v (status %d), want %d", err, got, c.status)
			}
			if !strings.Contains(err.Error(), c.wantMsg) {
				t.Errorf("POST cluster/join-remote = %q, want it to say %q", err, c.wantMsg)
			}
			if left := joinerState(t, joiner); len(left) != 0 {
				t.Errorf("joiner kept %v after a refused join, want nothing", left)
			}
			if after := serverState(t, srv); after != before {
				t.Errorf("cluster state changed by a refused join:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if n := mitmSeen.Load() - seenBefore; n != 0 {
				t.Errorf("the man in the middle saw %d requests, want 0", n)
			}
			var st api.JoinStatus
			if err := joinAPI.Query(ctx, http.MethodGet, "cluster/join-remote", nil, &st); err != nil || st.State != "none" {
				t.Errorf("GET cluster/join-remote = %+v, %v, want state none", st, err)
			}
		})
	}
}

func revoke(t *testing.T, c *client.Client, name string) {
	t.Helper()
	if err := c.Query(context.Background(), http.MethodDelete, "cluster/tokens/"+name, nil, nil); err != nil && statusOf(err) != http.StatusNotFound {
		t.Fatalf("revoke %s: %v", name, err)
	}
}

// fakeKubernetes (a testDaemon option) stands in for the Kubernetes of d, which these
// tests do not start (the two-node test runs the real one): the agent credential is not
// usable, so a join that wrongly went ahead would stop before starting k3s, and admission
// changes nothing.
func fakeKubernetes(d *Daemon) {
	d.wrapHooks = func(h cluster.Hooks) cluster.Hooks { return fakeKube{h} }
}

// fakeKube is the membership resource's hooks but for the agent credential and admission.
type fakeKube struct{ cluster.Hooks }

func (fakeKube) AgentCredential(context.Context, string) (cluster.AgentCredential, error) {
	return cluster.AgentCredential{ServerURL: "not-a-url", Token: "fake-agent-token", Expires: time.Now().Add(time.Minute)}, nil
}

func (fakeKube) Admit(context.Context, string, []string) error { return nil }

// clusterCA is the cluster CA of d (loaded from its state dir).
func clusterCA(t *testing.T, d *Daemon) *cluster.CA {
	t.Helper()
	ca, err := cluster.EnsureCA(d.cfg.ClusterDir())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// joinAs plays a joining node with tok against the cluster the token names, as a joining
// daemon does, and returns its identity and the address that answered.
func joinAs(t *testing.T, tok cluster.Token) (*cluster.MemberIdentity, string) {
	t.Helper()
	ctx := context.Background()
	key, err := cluster.NewMemberKey(tok.Name)
	if err != nil {
		t.Fatal(err)
	}
	req := api.JoinRequest{Name: tok.Name, Secret: tok.Secret, Address: "127.0.0.9:8443", CSR: key.CSRPEM}
	creds, addr, err := cluster.RequestJoin(ctx, tok, req)
	if err != nil {
		t.Fatalf("join as %s: %v", tok.Name, err)
	}
	id, err := cluster.SaveMemberIdentity(t.TempDir(), tok.Fingerprint, creds.CACertPEM, creds.MemberCertPEM, key.Key)
	if err != nil {
		t.Fatal(err)
	}
	req.CSR = ""
	if _, err := cluster.CompleteJoinWith(ctx, tok.Fingerprint, addr, id.Cert, req); err != nil {
		t.Fatalf("complete the join as %s: %v", tok.Name, err)
	}
	return id, addr
}

func TestJoinRemoteRefusesBadRequests(t *testing.T) {
	_, local := testDaemon(t, "node2")
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		body    any
		status  int
		wantMsg string
	}{
		{"unknown field", map[string]any{"token": "x", "admin": true}, http.StatusBadRequest, "unknown field"},
		{"empty token", api.JoinRemoteRequest{}, http.StatusBadRequest, "join token is empty"},
		{"unknown role", api.JoinRemoteRequest{Token: validLookingToken("node2"), Roles: []string{"gpu"}}, http.StatusBadRequest, "unknown role \"gpu\""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := local.Query(ctx, http.MethodPost, "cluster/join-remote", c.body, nil)
			if statusOf(err) != c.status || !strings.Contains(err.Error(), c.wantMsg) {
				t.Errorf("POST cluster/join-remote(%v) = %v, want %d %q", c.body, err, c.status, c.wantMsg)
			}
		})
	}
}

func validLookingToken(name string) string {
	b := make([]byte, 32)
	rand.Read(b)
	return cluster.Token{Name: name, Secret: base64.RawURLEncoding.EncodeToString(b), Fingerprint: strings.Repeat("ab", 32),
		Addresses: []string{"127.0.0.1:1"}, Expires: time.Now().Add(time.Hour)}.Encode()
}

// TestHeartbeatAfterRemoval: a member's heartbeat works until the cluster removes it, then
// answers ErrRemoved (what makes a removed node's daemon stop its agent).
func TestHeartbeatAfterRemoval(t *testing.T) {
	srv, srvAPI := testDaemon(t, "node1", fakeKubernetes)
	ctx := context.Background()
	tok := issue(t, srvAPI, "node7")
	id, addr := joinAs(t, tok)
	if err := cluster.SendHeartbeat(ctx, id, addr, "node7", "v-test", nil); err != nil {
		t.Fatalf("SendHeartbeat() = %v, want nil", err)
	}
	var ms []api.Member
	if err := srvAPI.Query(ctx, http.MethodGet, "cluster/members", nil, &ms); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ms, func(m api.Member) bool { return m.Name == "node7" })
	if i < 0 || ms[i].Version != "v-test" || ms[i].LastHeartbeat == nil || ms[i].NodeState != api.NodeUnknown {
		t.Errorf("GET cluster/members = %+v, want node7 with version v-test, a heartbeat and node state unknown (no Kubernetes here)", ms)
	}
	// Removal needs the node out of Kubernetes first; this daemon runs none, so the
	// record goes through the service directly.
	if err := srv.clusterSvc.RemoveMember(ctx, "node7"); err != nil {
		t.Fatal(err)
	}
	if err := cluster.SendHeartbeat(ctx, id, addr, "node7", "v-test", nil); !errors.Is(err, cluster.ErrRemoved) {
		t.Errorf("SendHeartbeat() after removal = %v, want ErrRemoved", err)
	}
	if _, err := srv.st.DB.GetMember(ctx, "node7"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetMember(node7) after removal = %v, want not found", err)
	}
}
