package store

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func TestTokenLifecycle(t *testing.T) {
	ctx := context.Background()
	d := newMemory(t)
	rec := TokenRecord{Name: "node2", SecretHash: "h1", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	if err := d.InsertToken(ctx, rec); err != nil {
		t.Fatalf("InsertToken(node2) = %v, want nil", err)
	}
	if err := d.InsertToken(ctx, rec); !errors.Is(err, ErrExists) {
		t.Fatalf("InsertToken(node2) again = %v, want ErrExists", err)
	}
	got, err := d.GetToken(ctx, "node2")
	if err != nil || !reflect.DeepEqual(got, rec) {
		t.Fatalf("GetToken(node2) = %+v, %v, want %+v, nil", got, err, rec)
	}
	if _, err := d.GetToken(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetToken(nope) = %v, want ErrNotFound", err)
	}
	// A token that expired can be replaced by a new one.
	later := TokenRecord{Name: "node2", SecretHash: "h2", CreatedAt: t0.Add(2 * time.Hour), ExpiresAt: t0.Add(3 * time.Hour)}
	if err := d.InsertToken(ctx, later); err != nil {
		t.Fatalf("InsertToken(node2) after expiry = %v, want nil", err)
	}
	if err := d.RevokeToken(ctx, "node2", t0.Add(150*time.Minute)); err != nil {
		t.Fatalf("RevokeToken(node2) = %v, want nil", err)
	}
	if err := d.RevokeToken(ctx, "node2", t0.Add(150*time.Minute)); !errors.Is(err, ErrNotFound) {
		t.Errorf("RevokeToken(node2) twice = %v, want ErrNotFound", err)
	}
	if err := d.ConsumeToken(ctx, "node2", t0.Add(151*time.Minute)); !errors.Is(err, ErrNotFound) {
		t.Errorf("ConsumeToken(revoked) = %v, want ErrNotFound", err)
	}
	got, _ = d.GetToken(ctx, "node2")
	if got.Live(t0.Add(151*time.Minute)) || got.RevokedAt.IsZero() {
		t.Errorf("GetToken(node2) after revoke = %+v, want revoked and not live", got)
	}
	// A revoked token can be replaced.
	third := TokenRecord{Name: "node2", SecretHash: "h3", CreatedAt: t0.Add(160 * time.Minute), ExpiresAt: t0.Add(4 * time.Hour)}
	if err := d.InsertToken(ctx, third); err != nil {
		t.Fatalf("InsertToken(node2) after revoke = %v, want nil", err)
	}
	if err := d.ConsumeToken(ctx, "node2", t0.Add(170*time.Minute)); err != nil {
		t.Fatalf("ConsumeToken(node2) = %v, want nil", err)
	}
	if err := d.ConsumeToken(ctx, "node2", t0.Add(171*time.Minute)); !errors.Is(err, ErrNotFound) {
		t.Errorf("ConsumeToken(node2) twice = %v, want ErrNotFound", err)
	}
	if err := d.InsertToken(ctx, TokenRecord{Name: "node3", SecretHash: "x", CreatedAt: t0, ExpiresAt: t0.Add(10 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	list, err := d.ListTokens(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "node2" || list[1].Name != "node3" {
		t.Fatalf("ListTokens() = %+v, %v, want node2, node3", list, err)
	}
	n, err := d.PurgeTokens(ctx, t0.Add(4*time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("PurgeTokens(+4h) = %d, %v, want 1, nil", n, err)
	}
	list, _ = d.ListTokens(ctx)
	if len(list) != 1 || list[0].Name != "node3" {
		t.Errorf("ListTokens() after purge = %+v, want node3 only", list)
	}
}

func TestInsertTokenRefusesMember(t *testing.T) {
	ctx := context.Background()
	d := newMemory(t)
	if err := d.AddMember(ctx, MemberRecord{Name: "node2", Address: "10.0.0.2:7443", Fingerprint: "fp2", JoinedAt: t0}); err != nil {
		t.Fatal(err)
	}
	err := d.InsertToken(ctx, TokenRecord{Name: "node2", SecretHash: "h", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)})
	if !errors.Is(err, ErrExists) {
		t.Errorf("InsertToken(member) = %v, want ErrExists", err)
	}
	if list, _ := d.ListTokens(ctx); len(list) != 0 {
		t.Errorf("ListTokens() = %+v, want none", list)
	}
}

func TestTrustAndMembers(t *testing.T) {
	ctx := context.Background()
	d := newMemory(t)
	c := TrustRecord{Fingerprint: "aa", Name: "ci", Kind: "client", CertPEM: "PEM", AddedAt: t0}
	if err := d.AddTrust(ctx, c); err != nil {
		t.Fatalf("AddTrust(ci) = %v, want nil", err)
	}
	if err := d.AddTrust(ctx, c); !errors.Is(err, ErrExists) {
		t.Errorf("AddTrust(ci) again = %v, want ErrExists", err)
	}
	if err := d.AddTrust(ctx, TrustRecord{Fingerprint: "bb", Name: "x", Kind: "admin", CertPEM: "P", AddedAt: t0}); err == nil {
		t.Errorf("AddTrust(kind admin) = nil, want a CHECK constraint error")
	}
	got, err := d.GetTrust(ctx, "aa")
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Errorf("GetTrust(aa) = %+v, %v, want %+v", got, err, c)
	}

	// CompleteJoin needs an unused token; without one nothing is stored.
	m := MemberRecord{Name: "node2", Address: "10.0.0.2:7443", Fingerprint: "cc", Roles: []string{"compute", "network"}, JoinedAt: t0, Hostname: "edge-17"}
	mt := TrustRecord{Fingerprint: "cc", Name: "node2", Kind: "member", CertPEM: "PEM2", AddedAt: t0}
	if err := d.CompleteJoin(ctx, m, mt, t0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("CompleteJoin(no token) = %v, want ErrNotFound", err)
	}
	if err := d.InsertToken(ctx, TokenRecord{Name: "node2", SecretHash: "h", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// A fingerprint already trusted makes the whole join roll back, token included.
	dup := mt
	dup.Fingerprint = "aa"
	dm := m
	dm.Fingerprint = "aa"
	if err := d.CompleteJoin(ctx, dm, dup, t0); !errors.Is(err, ErrExists) {
		t.Fatalf("CompleteJoin(trusted fingerprint) = %v, want ErrExists", err)
	}
	if tok, _ := d.GetToken(ctx, "node2"); !tok.ConsumedAt.IsZero() {
		t.Fatalf("token after failed CompleteJoin = %+v, want unconsumed", tok)
	}
	if ms, _ := d.ListMembers(ctx); len(ms) != 0 {
		t.Fatalf("ListMembers() after failed CompleteJoin = %+v, want none", ms)
	}
	if err := d.CompleteJoin(ctx, m, mt, t0); err != nil {
		t.Fatalf("CompleteJoin(node2) = %v, want nil", err)
	}
	gm, err := d.GetMember(ctx, "node2")
	if err != nil || !reflect.DeepEqual(gm, m) {
		t.Errorf("GetMember(node2) = %+v, %v, want %+v", gm, err, m)
	}
	if err := d.MemberHeartbeat(ctx, "node2", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := d.MemberHeartbeat(ctx, "nope", t0); !errors.Is(err, ErrNotFound) {
		t.Errorf("MemberHeartbeat(nope) = %v, want ErrNotFound", err)
	}
	ms, err := d.ListMembers(ctx)
	if err != nil || len(ms) != 1 || !ms[0].LastHeartbeat.Equal(t0.Add(time.Minute)) {
		t.Errorf("ListMembers() = %+v, %v, want node2 with heartbeat", ms, err)
	}
	ts, _ := d.ListTrust(ctx)
	if len(ts) != 2 {
		t.Errorf("ListTrust() = %+v, want 2 entries", ts)
	}
	if err := d.RemoveMember(ctx, "node2", time.Now()); err != nil {
		t.Fatalf("RemoveMember(node2) = %v, want nil", err)
	}
	if err := d.RemoveMember(ctx, "node2", time.Now()); !errors.Is(err, ErrNotFound) {
		t.Errorf("RemoveMember(node2) twice = %v, want ErrNotFound", err)
	}
	if _, err := d.GetTrust(ctx, "cc"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetTrust(member cert) after removal = %v, want ErrNotFound", err)
	}
	if err := d.RemoveTrust(ctx, "aa"); err != nil {
		t.Errorf("RemoveTrust(aa) = %v, want nil", err)
	}
	if err := d.RemoveTrust(ctx, "aa"); !errors.Is(err, ErrNotFound) {
		t.Errorf("RemoveTrust(aa) twice = %v, want ErrNotFound", err)
	}
}

// TestMemberCertRenewalAndRemoval: a renewed certificate becomes the member's while the
// old one stays trusted until pruned; removal forgets the member and trusts none of its
// certificates but remembers every one of them as a removed member's.
func TestMemberCertRenewalAndRemoval(t *testing.T) {
	ctx := context.Background()
	d := newMemory(t)
	if err := d.InsertToken(ctx, TokenRecord{Name: "node3", SecretHash: "h", Roles: []string{"compute", "network"}, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if tok, err := d.GetToken(ctx, "node3"); err != nil || strings.Join(tok.Roles, ",") != "compute,network" {
		t.Fatalf("GetToken(node3) = %+v, %v, want roles compute,network", tok, err)
	}
	m := MemberRecord{Name: "node3", Address: "10.0.0.3:8443", Fingerprint: "f1", Roles: []string{"compute"}, JoinedAt: t0}
	if err := d.CompleteJoin(ctx, m, TrustRecord{Fingerprint: "f1", Name: "node3", Kind: "member", CertPEM: "P1", AddedAt: t0}, t0); err != nil {
		t.Fatal(err)
	}
	if err := d.RenewMemberCert(ctx, TrustRecord{Fingerprint: "f2", Name: "node3", Kind: "member", CertPEM: "P2", AddedAt: t0}); err != nil {
		t.Fatalf("RenewMemberCert(f2) = %v, want nil", err)
	}
	if err := d.RenewMemberCert(ctx, TrustRecord{Fingerprint: "f9", Name: "ghost", Kind: "member", CertPEM: "P", AddedAt: t0}); !errors.Is(err, ErrNotFound) {
		t.Errorf("RenewMemberCert(ghost) = %v, want ErrNotFound", err)
	}
	if _, err := d.GetTrust(ctx, "f9"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a failed renewal left its certificate trusted: %v", err)
	}
	if gm, _ := d.GetMember(ctx, "node3"); gm.Fingerprint != "f2" {
		t.Errorf("member fingerprint after renewal = %s, want f2", gm.Fingerprint)
	}
	for _, fp := range []string{"f1", "f2"} {
		if _, err := d.GetTrust(ctx, fp); err != nil {
			t.Errorf("GetTrust(%s) before pruning = %v, want trusted", fp, err)
		}
	}
	if n, err := d.PruneMemberCerts(ctx, "node3"); err != nil || n != 1 {
		t.Errorf("PruneMemberCerts(node3) = %d, %v, want 1", n, err)
	}
	if _, err := d.GetTrust(ctx, "f1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("old certificate after pruning: %v, want not trusted", err)
	}
	if err := d.RenewMemberCert(ctx, TrustRecord{Fingerprint: "f3", Name: "node3", Kind: "member", CertPEM: "P3", AddedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if err := d.RemoveMember(ctx, "node3", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	rm, err := d.ListRemovedMembers(ctx)
	if err != nil || len(rm) != 2 || rm[0].Fingerprint != "f2" || rm[1].Fingerprint != "f3" || rm[0].Name != "node3" || !rm[1].RemovedAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("ListRemovedMembers() = %+v, %v, want f2 and f3 of node3", rm, err)
	}
	if ts, _ := d.ListTrust(ctx); len(ts) != 0 {
		t.Errorf("trust after removal = %+v, want none", ts)
	}
}
