package cluster

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/osdcloud/osd/daemon/api"
)

// joinStep is one joining host against tc: the token of name and the key whose CSR its
// first step sends.
type joinStep struct {
	tc  *testCluster
	tok Token
	key *MemberKey
}

// issueJoin issues a join token for name with roles as an operator.
func (tc *testCluster) issueJoin(t testing.TB, name string, roles ...string) joinStep {
	t.Helper()
	var issued api.IssuedToken
	if err := tc.client(t, tc.trustedClient(t, "admin-"+name)).Query(context.Background(), http.MethodPost, "cluster/tokens", api.TokenRequest{Name: name, Roles: roles}, &issued); err != nil {
		t.Fatalf("POST cluster/tokens = %v", err)
	}
	tok, err := DecodeToken(issued.Token)
	if err != nil {
		t.Fatal(err)
	}
	key, err := NewMemberKey(name)
	if err != nil {
		t.Fatal(err)
	}
	return joinStep{tc: tc, tok: tok, key: key}
}

func (j joinStep) request(hostname string) api.JoinRequest {
	return api.JoinRequest{Name: j.tok.Name, Secret: j.tok.Secret, Address: "127.0.0.9:8443", CSR: j.key.CSRPEM, Hostname: hostname}
}

// first sends the join's first step from a host called hostname over HTTPS.
func (j joinStep) first(hostname string) (api.JoinResponse, string, error) {
	return RequestJoin(context.Background(), j.tok, j.request(hostname))
}

// complete registers the join whose first step answered creds from addr.
func (j joinStep) complete(t *testing.T, hostname string, creds api.JoinResponse, addr string) (api.Member, error) {
	t.Helper()
	id, err := SaveMemberIdentity(t.TempDir(), j.tok.Fingerprint, creds.CACertPEM, creds.MemberCertPEM, j.key.Key)
	if err != nil {
		t.Fatalf("SaveMemberIdentity(%s) = %v", j.tok.Name, err)
	}
	req := j.request(hostname)
	req.CSR = ""
	return CompleteJoinWith(context.Background(), j.tok.Fingerprint, addr, id.Cert, req)
}

// joinFrom runs both steps from a host called hostname, failing the test on a refusal.
func (j joinStep) joinFrom(t *testing.T, hostname string) api.Member {
	t.Helper()
	creds, addr, err := j.first(hostname)
	if err != nil {
		t.Fatalf("RequestJoin(%s from host %q) = %v, want it accepted", j.tok.Name, hostname, err)
	}
	m, err := j.complete(t, hostname, creds, addr)
	if err != nil {
		t.Fatalf("CompleteJoinWith(%s from host %q) = %v, want it accepted", j.tok.Name, hostname, err)
	}
	return m
}

// clusterState is what a join can change on the cluster's side: tokens and their
// states, members with their hostnames, trusted certificates.
func clusterState(t *testing.T, tc *testCluster) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	toks, err := tc.db.ListTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range toks {
		fmt.Fprintf(&b, "token %s consumed=%v revoked=%v\n", tk.Name, !tk.ConsumedAt.IsZero(), !tk.RevokedAt.IsZero())
	}
	ms, err := tc.db.ListMembers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		fmt.Fprintf(&b, "member %s hostname=%q\n", m.Name, m.Hostname)
	}
	ts, err := tc.db.ListTrust(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range ts {
		fmt.Fprintf(&b, "trust %s %s\n", tr.Kind, tr.Name)
	}
	return b.String()
}

// refused checks that err is the cluster's 409 naming hostname and other and saying
// again (how to retry), and that
// neither the cluster's records nor the Kubernetes stand-in saw anything of the join.
func refused(t *testing.T, tc *testCluster, err error, hostname, other, again, before string, agents *atomic.Int32) {
	t.Helper()
	want := fmt.Sprintf("this host's hostname %q is also the hostname of %s: OpenStack names each compute host's hypervisor by its hostname", hostname, other)
	if statusOf(err) != http.StatusConflict || !strings.Contains(err.Error(), want) ||
		!strings.Contains(err.Error(), "hostnamectl set-hostname NAME") || !strings.Contains(err.Error(), again) {
		t.Errorf("join from host %q = %v (status %d), want 409 saying %q and the fix", hostname, err, statusOf(err), want)
	}
	if after := clusterState(t, tc); after != before {
		t.Errorf("cluster state changed by a refused join:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if n := agents.Load(); n != 0 {
		t.Errorf("a refused join got %d agent credentials, want none", n)
	}
}

// TestJoinRefusesTakenHostname runs the cluster's real join handlers over HTTPS with
// SQLite: a host whose hostname the answering node or a member has is refused with a
// 409 that names the fix, before anything is stored or any credential issued, and its
// token joins once the hostname is changed. A joiner that sends no hostname joins as
// before; a removed member joins again from its old hostname.
func TestJoinRefusesTakenHostname(t *testing.T) {
	const joinAgain = "and add it to /etc/hosts) and run osd join again with the same token"
	tc := startCluster(t)
	tc.hooks.hostname = func() string { return "vm" }
	tc.hooks.local = func() *api.Member { return &api.Member{Name: "node1", Local: true} }
	var agents atomic.Int32
	agent := tc.hooks.agent
	tc.hooks.agent = func(ctx context.Context, name string) (AgentCredential, error) {
		agents.Add(1)
		return agent(ctx, name)
	}

	node2 := tc.issueJoin(t, "node2")
	before := clusterState(t, tc)
	_, _, err := node2.first("VM")
	refused(t, tc, err, "VM", "node1 (the node answering this join)", joinAgain, before, &agents)

	// The same token, once the host has a hostname of its own.
	if m := node2.joinFrom(t, "edge-2"); m.Hostname != "edge-2" {
		t.Errorf("member node2 = %+v, want hostname edge-2", m)
	}
	<-tc.admitted
	var listed api.Member
	if err := tc.client(t, tc.trustedClient(t, "reader")).Query(context.Background(), http.MethodGet, "cluster/members/node2", nil, &listed); err != nil || listed.Hostname != "edge-2" {
		t.Errorf("GET cluster/members/node2 = %+v, %v, want hostname edge-2", listed, err)
	}

	node3 := tc.issueJoin(t, "node3")
	agents.Store(0)
	before = clusterState(t, tc)
	_, _, err = node3.first("EDGE-2")
	refused(t, tc, err, "EDGE-2", "member node2", joinAgain, before, &agents)
	// A joiner from before hostnames were sent: not checked, nothing recorded.
	if m := node3.joinFrom(t, ""); m.Hostname != "" {
		t.Errorf("member node3 joined without a hostname = %+v, want none recorded", m)
	}
	<-tc.admitted

	// Two hosts of one hostname whose first steps both passed: the second to complete
	// is refused, its token still unused (in a real join its agent has started, so the
	// host resets before it joins again).
	node4, node5 := tc.issueJoin(t, "node4"), tc.issueJoin(t, "node5")
	creds4, addr4, err := node4.first("edge-45")
	if err != nil {
		t.Fatalf("RequestJoin(node4) = %v", err)
	}
	node5.joinFrom(t, "edge-45")
	<-tc.admitted
	agents.Store(0)
	before = clusterState(t, tc)
	_, err = node4.complete(t, "edge-45", creds4, addr4)
	refused(t, tc, err, "edge-45", "member node5", "run osd reset on this host, then osd join again with the same token", before, &agents)
	node4.joinFrom(t, "edge-4")
	<-tc.admitted

	// Removed, node2 joins again from the same host.
	if err := tc.svc.RemoveMember(context.Background(), "node2"); err != nil {
		t.Fatal(err)
	}
	tc.issueJoin(t, "node2").joinFrom(t, "edge-2")
	<-tc.admitted
	want := "member node2 hostname=\"edge-2\"\nmember node3 hostname=\"\"\nmember node4 hostname=\"edge-4\"\nmember node5 hostname=\"edge-45\"\n"
	if got := clusterState(t, tc); !strings.Contains(got, want) {
		t.Errorf("cluster state at the end:\n%s\nwant the members:\n%s", got, want)
	}
}
