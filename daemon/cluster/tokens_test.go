package cluster

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/rest"
	"github.com/osdcloud/osd/daemon/store"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

var testFP = strings.Repeat("0f", 32)

func newDB(t testing.TB) *store.DB {
	t.Helper()
	db, err := store.OpenMemory(context.Background())
	if err != nil {
		t.Fatalf("OpenMemory() = %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func issueToken(t *testing.T, db *store.DB, name string, now time.Time) Token {
	t.Helper()
	tok, err := Issue(context.Background(), db, name, nil, time.Hour, []string{"127.0.0.1:7443"}, testFP, now)
	if err != nil {
		t.Fatalf("Issue(%s) = %v, want nil", name, err)
	}
	return tok
}

func TestIssue(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	tok := issueToken(t, db, "node2", t0)
	if !tok.Expires.Equal(t0.Add(time.Hour)) || tok.Fingerprint != testFP || tok.validate() != nil {
		t.Errorf("Issue(node2) = %+v, want a valid token expiring at %s", tok, t0.Add(time.Hour))
	}
	rec, err := db.GetToken(ctx, "node2")
	if err != nil {
		t.Fatal(err)
	}
	if rec.SecretHash == tok.Secret || rec.SecretHash != hashSecret(tok.Secret) {
		t.Errorf("stored secret = %q, want only sha256(secret)", rec.SecretHash)
	}
	if strings.Join(rec.Roles, ",") != "compute,network" {
		t.Errorf("stored roles = %v, want the default compute,network", rec.Roles)
	}
	other := issueToken(t, db, "node3", t0)
	if other.Secret == tok.Secret {
		t.Error("two tokens share a secret, want fresh random secrets")
	}

	if err := db.AddMember(ctx, store.MemberRecord{Name: "node9", Address: "10.0.0.9:7443", Fingerprint: "f9", JoinedAt: t0}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		member  string
		roles   []string
		ttl     time.Duration
		addrs   []string
		fp      string
		now     time.Time
		want    error
		wantMsg string
	}{
		{"live token exists", "node2", nil, time.Hour, []string{"a:1"}, testFP, t0.Add(time.Minute), ErrTokenExists,
			"a join token for node2 already exists: revoke it first (osd cluster revoke node2)"},
		{"already a member", "node9", nil, time.Hour, []string{"a:1"}, testFP, t0, ErrAlreadyMember,
			"node9 is already a member of the cluster: remove it first (osd cluster remove node9)"},
		{"bad name", "Node2", nil, time.Hour, []string{"a:1"}, testFP, t0, ErrInvalid, "member name"},
		{"bad role", "node4", []string{"gpu"}, time.Hour, []string{"a:1"}, testFP, t0, ErrInvalid, `unknown role "gpu"`},
		{"ttl too short", "node4", nil, time.Second, []string{"a:1"}, testFP, t0, ErrInvalid, "out of range"},
		{"no address", "node4", nil, time.Hour, nil, testFP, t0, ErrInvalid, "no cluster address"},
		{"bad address", "node4", nil, time.Hour, []string{"a"}, testFP, t0, ErrInvalid, "not host:port"},
		{"bad fingerprint", "node4", nil, time.Hour, []string{"a:1"}, "xyz", t0, ErrInvalid, "fingerprint"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Issue(ctx, db, c.member, c.roles, c.ttl, c.addrs, c.fp, c.now)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.wantMsg) {
				t.Errorf("Issue(%s) = %v, want %v containing %q", c.member, err, c.want, c.wantMsg)
			}
		})
	}
	// Once expired, the name can get a new token.
	if _, err := Issue(ctx, db, "node2", []string{"storage", "control"}, 0, []string{"a:1"}, testFP, t0.Add(61*time.Minute)); err != nil {
		t.Errorf("Issue(node2) after expiry = %v, want nil", err)
	}
	if rec, _ := db.GetToken(ctx, "node2"); strings.Join(rec.Roles, ",") != "control,storage" {
		t.Errorf("roles of the new token = %v, want control,storage", rec.Roles)
	}
}

func TestVerify(t *testing.T) {
	ctx := context.Background()
	type setup func(t *testing.T, db *store.DB, tok Token)
	cases := []struct {
		name    string
		setup   setup
		member  string // name sent; "" means the token's
		secret  func(tok Token) string
		now     time.Time
		want    error
		status  int
		wantMsg string
	}{
		{name: "valid", now: t0.Add(time.Minute)},
		{name: "valid until the last millisecond", now: t0.Add(time.Hour - time.Millisecond)},
		{name: "expired", now: t0.Add(time.Hour), want: ErrTokenExpired, status: http.StatusForbidden, wantMsg: "expired at 2026-11-21T13:00:00Z"},
		// A caller without the secret learns nothing: forged secret, unknown name and a
		// purged token get one answer.
		{name: "forged secret", secret: func(Token) string { s, _ := newSecret(); return s }, now: t0,
			want: ErrTokenInvalid, status: http.StatusUnauthorized, wantMsg: "the join token for node2 is not valid: it was mistyped, replaced by a newer one, or expired and was purged"},
		{name: "unknown name", member: "node7", secret: func(Token) string { return "x" }, now: t0,
			want: ErrTokenInvalid, status: http.StatusUnauthorized, wantMsg: "the join token for node7 is not valid: it was mistyped, replaced by a newer one, or expired and was purged"},
		{name: "wrong name", member: "node3", now: t0, setup: func(t *testing.T, db *store.DB, _ Token) { issueToken(t, db, "node3", t0) },
			want: ErrTokenWrongName, status: http.StatusForbidden, wantMsg: "issued for node2, not node3"},
		{name: "revoked", now: t0.Add(2 * time.Minute), setup: func(t *testing.T, db *store.DB, tok Token) {
			if err := Revoke(ctx, db, tok.Name, t0.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
		}, want: ErrTokenRevoked, status: http.StatusForbidden, wantMsg: "revoked at"},
		{name: "consumed", now: t0.Add(2 * time.Minute), setup: func(t *testing.T, db *store.DB, tok Token) {
			if err := Consume(ctx, db, tok.Name, t0.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
		}, want: ErrTokenConsumed, status: http.StatusForbidden, wantMsg: "already used"},
		{name: "purged after expiry", now: t0.Add(2 * time.Hour), setup: func(t *testing.T, db *store.DB, tok Token) {
			if n, err := PurgeExpired(ctx, db, t0.Add(2*time.Hour)); err != nil || n != 1 {
				t.Fatalf("PurgeExpired() = %d, %v, want 1, nil", n, err)
			}
		}, want: ErrTokenInvalid, status: http.StatusUnauthorized, wantMsg: "the join token for node2 is not valid: it was mistyped, replaced by a newer one, or expired and was purged"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := newDB(t)
			tok := issueToken(t, db, "node2", t0)
			if c.setup != nil {
				c.setup(t, db, tok)
			}
			name, secret := tok.Name, tok.Secret
			if c.member != "" {
				name = c.member
			}
			if c.secret != nil {
				secret = c.secret(tok)
			}
			_, err := Verify(ctx, db, name, secret, c.now)
			if c.want == nil {
				if err != nil {
					t.Fatalf("Verify() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("Verify() = %v, want %v", err, c.want)
			}
			if got := rest.StatusFor(err); got != c.status {
				t.Errorf("StatusFor(Verify()) = %d, want %d", got, c.status)
			}
			if !strings.Contains(err.Error(), c.wantMsg) {
				t.Errorf("Verify() = %q, want it to contain %q", err, c.wantMsg)
			}
		})
	}
}

func TestConsumeOnlyOnceAndRetryBefore(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	tok := issueToken(t, db, "node2", t0)
	// A join that failed part way verifies again and again.
	for i := range 3 {
		if _, err := Verify(ctx, db, tok.Name, tok.Secret, t0.Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatalf("Verify() attempt %d = %v, want nil", i, err)
		}
	}
	if err := Consume(ctx, db, tok.Name, t0.Add(5*time.Minute)); err != nil {
		t.Fatalf("Consume() = %v, want nil", err)
	}
	if err := Consume(ctx, db, tok.Name, t0.Add(6*time.Minute)); !errors.Is(err, ErrTokenUnknown) {
		t.Errorf("Consume() twice = %v, want ErrTokenUnknown", err)
	}
	if err := Revoke(ctx, db, tok.Name, t0.Add(7*time.Minute)); !errors.Is(err, ErrTokenUnknown) {
		t.Errorf("Revoke(consumed) = %v, want ErrTokenUnknown", err)
	}
	list, err := ListTokens(ctx, db, t0.Add(8*time.Minute))
	if err != nil || len(list) != 1 || list[0].State != api.TokenConsumed {
		t.Errorf("ListTokens() = %+v, %v, want node2 consumed", list, err)
	}
}

func TestTokenState(t *testing.T) {
	base := store.TokenRecord{Name: "n", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	revoked, consumed := base, base
	revoked.RevokedAt = t0.Add(time.Minute)
	consumed.ConsumedAt = t0.Add(time.Minute)
	cases := []struct {
		name string
		rec  store.TokenRecord
		now  time.Time
		want string
	}{
		{"pending", base, t0, api.TokenPending},
		{"expired", base, t0.Add(time.Hour), api.TokenExpired},
		{"revoked wins over expired", revoked, t0.Add(2 * time.Hour), api.TokenRevoked},
		{"consumed wins over expired", consumed, t0.Add(2 * time.Hour), api.TokenConsumed},
	}
	for _, c := range cases {
		if got := tokenState(c.rec, c.now); got != c.want {
			t.Errorf("tokenState(%s) = %s, want %s", c.name, got, c.want)
		}
	}
}
