package cluster

import (
	"context"
	"crypto"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/rest"
)

// fakeJoinDeps records what HandleJoin asked for. HandleJoin's decisions are tested
// against it; the real Service (SQLite, CA) is tested end to end in https_test.go.
type fakeJoinDeps struct {
	verifyErr error
	member    bool
	agentErr  error
	issued    []string
	agents    []string
	hosts     []api.Member // Hostnames' answer
}

func (f *fakeJoinDeps) VerifyToken(context.Context, string, string) ([]string, error) {
	return []string{"compute", "network"}, f.verifyErr
}
func (f *fakeJoinDeps) IsMember(context.Context, string) (bool, error) { return f.member, nil }
func (f *fakeJoinDeps) IssueMemberCert(name string, pub crypto.PublicKey) ([]byte, error) {
	f.issued = append(f.issued, name)
	return []byte("CERT " + name), nil
}
func (f *fakeJoinDeps) CACertPEM() []byte { return []byte("CA") }
func (f *fakeJoinDeps) Hostnames(context.Context) ([]api.Member, error) {
	return f.hosts, nil
}
func (f *fakeJoinDeps) Release(context.Context) (string, error) { return "epoxy", nil }
func (f *fakeJoinDeps) AgentCredential(_ context.Context, name string) (AgentCredential, error) {
	f.agents = append(f.agents, name)
	return AgentCredential{ServerURL: "https://10.0.0.1:6443", Token: "K10abc::id1234.secret", Expires: t0}, f.agentErr
}

func mustCSR(t testing.TB, name string) string {
	t.Helper()
	k, err := NewMemberKey(name)
	if err != nil {
		t.Fatal(err)
	}
	return k.CSRPEM
}

func TestHandleJoin(t *testing.T) {
	csr := mustCSR(t, "node2")
	ok := api.JoinRequest{Name: "node2", Secret: "s", Address: "10.0.0.2:7443", CSR: csr, Hostname: "edge-2"}
	hosts := []api.Member{{Name: "node1", Hostname: "vm", Local: true}, {Name: "node3", Hostname: "Edge-2"}}
	with := func(f func(r *api.JoinRequest)) api.JoinRequest {
		r := ok
		f(&r)
		return r
	}
	sameAsSelf := with(func(r *api.JoinRequest) { r.Hostname = "VM" })
	tampered := strings.Replace(csr, csr[100:110], "AAAAAAAAAA", 1)
	cases := []struct {
		name    string
		req     api.JoinRequest
		deps    fakeJoinDeps
		status  int
		wantMsg string
	}{
		{name: "ok", req: ok, status: http.StatusOK},
		{name: "bad name", req: with(func(r *api.JoinRequest) { r.Name = "node 2" }), status: http.StatusBadRequest, wantMsg: "member name"},
		{name: "no secret", req: with(func(r *api.JoinRequest) { r.Secret = "" }), status: http.StatusBadRequest, wantMsg: "no secret"},
		{name: "bad address", req: with(func(r *api.JoinRequest) { r.Address = "10.0.0.2" }), status: http.StatusBadRequest, wantMsg: "not host:port"},
		{name: "no CSR", req: with(func(r *api.JoinRequest) { r.CSR = "" }), status: http.StatusBadRequest, wantMsg: "no certificate request"},
		{name: "CSR not PEM", req: with(func(r *api.JoinRequest) { r.CSR = "hello" }), status: http.StatusBadRequest, wantMsg: "not a PEM CERTIFICATE REQUEST"},
		{name: "CSR tampered", req: with(func(r *api.JoinRequest) { r.CSR = tampered }), status: http.StatusBadRequest, wantMsg: "certificate request"},
		{name: "CSR too big", req: with(func(r *api.JoinRequest) { r.CSR = strings.Repeat("A", maxCSR+1) }), status: http.StatusBadRequest, wantMsg: "at most"},
		{name: "invalid token", req: ok, deps: fakeJoinDeps{verifyErr: errorf(ErrTokenInvalid, "nope")}, status: http.StatusUnauthorized, wantMsg: "nope"},
		{name: "expired", req: ok, deps: fakeJoinDeps{verifyErr: errorf(ErrTokenExpired, "late")}, status: http.StatusForbidden},
		{name: "revoked", req: ok, deps: fakeJoinDeps{verifyErr: errorf(ErrTokenRevoked, "gone")}, status: http.StatusForbidden},
		{name: "consumed", req: ok, deps: fakeJoinDeps{verifyErr: errorf(ErrTokenConsumed, "used")}, status: http.StatusForbidden},
		{name: "wrong name", req: ok, deps: fakeJoinDeps{verifyErr: errorf(ErrTokenWrongName, "other")}, status: http.StatusForbidden},
		{name: "already a member", req: ok, deps: fakeJoinDeps{member: true}, status: http.StatusConflict, wantMsg: "already a member"},
		{name: "hostname of the answering node", req: sameAsSelf, deps: fakeJoinDeps{hosts: hosts}, status: http.StatusConflict,
			wantMsg: `this host's hostname "VM" is also the hostname of node1 (the node answering this join)`},
		{name: "hostname of a member", req: ok, deps: fakeJoinDeps{hosts: hosts}, status: http.StatusConflict,
			wantMsg: `this host's hostname "edge-2" is also the hostname of member node3: OpenStack names each compute host's hypervisor by its hostname`},
		{name: "hostname taken, token checked first", req: ok, deps: fakeJoinDeps{hosts: hosts, verifyErr: errorf(ErrTokenInvalid, "nope")}, status: http.StatusUnauthorized, wantMsg: "nope"},
		{name: "unique hostname", req: with(func(r *api.JoinRequest) { r.Hostname = "edge-4" }), deps: fakeJoinDeps{hosts: hosts}, status: http.StatusOK},
		{name: "no hostname (older joiner)", req: with(func(r *api.JoinRequest) { r.Hostname = "" }), deps: fakeJoinDeps{hosts: hosts}, status: http.StatusOK},
		{name: "bad hostname", req: with(func(r *api.JoinRequest) { r.Hostname = "edge_2" }), status: http.StatusBadRequest, wantMsg: `hostname "edge_2" is not an RFC 1123 hostname`},
		{name: "k3s not ready", req: ok, deps: fakeJoinDeps{agentErr: errors.New("no server CA yet")}, status: http.StatusServiceUnavailable, wantMsg: "no server CA yet"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			deps := c.deps
			resp, err := HandleJoin(context.Background(), &deps, c.req)
			if got := rest.StatusFor(err); got != c.status {
				t.Fatalf("StatusFor(HandleJoin()) = %d (%v), want %d", got, err, c.status)
			}
			if c.status != http.StatusOK {
				if !strings.Contains(err.Error(), c.wantMsg) {
					t.Errorf("HandleJoin() = %q, want it to contain %q", err, c.wantMsg)
				}
				if len(deps.issued) != 0 {
					t.Errorf("HandleJoin() refused but issued certificates for %v, want none", deps.issued)
				}
				if c.status != http.StatusServiceUnavailable && len(deps.agents) != 0 {
					t.Errorf("HandleJoin() refused but issued agent credentials for %v, want none", deps.agents)
				}
				return
			}
			want := api.JoinResponse{MemberCertPEM: "CERT node2", CACertPEM: "CA", Roles: []string{"compute", "network"},
				K3sServerURL: "https://10.0.0.1:6443", K3sToken: "K10abc::id1234.secret", K3sTokenExpires: t0}
			if !slices.Equal(resp.Roles, want.Roles) || resp.MemberCertPEM != want.MemberCertPEM || resp.CACertPEM != want.CACertPEM ||
				resp.K3sServerURL != want.K3sServerURL || resp.Release != "epoxy" || resp.K3sToken != want.K3sToken || !resp.K3sTokenExpires.Equal(want.K3sTokenExpires) {
				t.Errorf("HandleJoin() = %+v, want %+v", resp, want)
			}
		})
	}
}

func TestMemberCertDue(t *testing.T) {
	ca := mustCA(t)
	now := time.Now()
	k, _ := NewMemberKey("node2")
	for _, c := range []struct {
		at   time.Duration // after issue
		life time.Duration
		due  bool
	}{
		{0, 2 * time.Minute, false},
		{50 * time.Second, 2 * time.Minute, false},
		{70 * time.Second, 2 * time.Minute, true},
		{3 * time.Minute, 2 * time.Minute, true},
		{100 * 24 * time.Hour, MemberCertLifetime, false},
		{200 * 24 * time.Hour, MemberCertLifetime, true},
	} {
		certPEM, err := IssueMemberCert(ca, "node2", &k.Key.PublicKey, now, c.life)
		if err != nil {
			t.Fatal(err)
		}
		cert, _ := ParseCertPEM(certPEM)
		if got := MemberCertDue(cert, now.Add(c.at)); got != c.due {
			t.Errorf("MemberCertDue(%s-certificate, %s after issue) = %v, want %v", c.life, c.at, got, c.due)
		}
	}
}

func TestValidateHostname(t *testing.T) {
	long := strings.Repeat("a", 63)
	for _, c := range []struct {
		hostname string
		wantMsg  string // "" for valid
	}{
		{"vm", ""},
		{"Edge-17", ""},
		{"edge-17.example.com", ""},
		{"0lead-digit", ""},
		{long + "." + long + "." + long + "." + strings.Repeat("a", 61), ""}, // 253
		{long + "." + long + "." + long + "." + strings.Repeat("a", 62), "is 254 characters long, want at most 253"},
		{long + "a", "is 64 characters long, want at most 63"},
		{"edge_17", `contains '_'`},
		{"edge 17", `contains ' '`},
		{"-edge", "starts or ends with '-'"},
		{"edge-", "starts or ends with '-'"},
		{"edge..example", "empty label"},
		{"edge.", "empty label"},
		{".edge", "empty label"},
		{"édge", `contains 'é'`},
	} {
		err := ValidateHostname(c.hostname)
		switch {
		case c.wantMsg == "" && err != nil:
			t.Errorf("ValidateHostname(%q) = %v, want nil", c.hostname, err)
		case c.wantMsg != "" && (err == nil || !strings.Contains(err.Error(), c.wantMsg) || rest.StatusFor(err) != http.StatusBadRequest):
			t.Errorf("ValidateHostname(%q) = %v, want a 400 saying %q", c.hostname, err, c.wantMsg)
		}
	}
}

func TestHostnameConflict(t *testing.T) {
	nodes := []api.Member{
		{Name: "node1", Hostname: "vm", Local: true},
		{Name: "node2", Hostname: "Edge-2.example.com"},
		{Name: "node3"}, // joined before hostnames were recorded
	}
	for _, c := range []struct {
		desc, name, hostname string
		nodes                []api.Member
		completing           bool
		wantMsg              string // "" for no conflict
	}{
		{"unique", "node4", "edge-4", nodes, false, ""},
		{"no hostname sent", "node4", "", nodes, false, ""},
		{"no nodes", "node4", "vm", nil, false, ""},
		{"the answering node's", "node4", "vm", nodes, false, `this host's hostname "vm" is also the hostname of node1 (the node answering this join): OpenStack names each compute host's hypervisor by its hostname, so two hosts with one name break scheduling; give this host a unique hostname (hostnamectl set-hostname NAME, and add it to /etc/hosts) and run osd join again with the same token`},
		{"the answering node's, other case", "node4", "VM", nodes, false, "node1 (the node answering this join)"},
		{"a member's, at the last step", "node4", "edge-2.example.com", nodes, true, "and add it to /etc/hosts) and run osd reset on this host, then osd join again with the same token"},
		{"a member's, other case", "node4", "edge-2.EXAMPLE.com", nodes, false, "is also the hostname of member node2"},
		{"only the first label alike", "node4", "edge-2.example.org", nodes, false, ""},
		{"its own record (a completion repeated)", "node2", "edge-2.example.com", nodes, false, ""},
		{"named as the answering node", "node1", "vm", nodes, false, "node1 (the node answering this join)"},
	} {
		err := hostnameConflict(c.name, c.hostname, c.nodes, c.completing)
		switch {
		case c.wantMsg == "" && err != nil:
			t.Errorf("%s: hostnameConflict(%s, %q) = %v, want nil", c.desc, c.name, c.hostname, err)
		case c.wantMsg != "" && (err == nil || !strings.Contains(err.Error(), c.wantMsg) || !errors.Is(err, ErrHostnameTaken) || rest.StatusFor(err) != http.StatusConflict):
			t.Errorf("%s: hostnameConflict(%s, %q) = %v, want a 409 saying %q", c.desc, c.name, c.hostname, err, c.wantMsg)
		}
	}
}
