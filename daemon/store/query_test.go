package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestQueryHelpers runs queryRows and queryOne on the real database: order, no rows, and
// the wording of every error (the getters and listers keep theirs).
func TestQueryHelpers(t *testing.T) {
	ctx := context.Background()
	d := newMemory(t)
	for _, kv := range [][2]string{{"b", "2"}, {"a", "1"}, {"c", "3"}} {
		if err := d.SetConfig(ctx, kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	const q = `SELECT key FROM config WHERE key >= ? ORDER BY key`
	got, err := queryRows(ctx, d.db, "read keys", scanString, q, "b")
	if err != nil || !slices.Equal(got, []string{"b", "c"}) {
		t.Errorf("queryRows(>= b) = %v, %v, want [b c]", got, err)
	}
	if got, err := queryRows(ctx, d.db, "read keys", scanString, q, "z"); err != nil || got != nil {
		t.Errorf("queryRows(>= z) = %#v, %v, want nil, nil", got, err)
	}
	failScan := func(rowScanner) (string, error) { return "", errors.New("boom") }
	if _, err := queryRows(ctx, d.db, "read keys", failScan, q, "a"); err == nil || err.Error() != "read keys: boom" {
		t.Errorf("queryRows with a failing scan = %v, want \"read keys: boom\"", err)
	}
	if _, err := queryRows(ctx, d.db, "read keys", scanString, `SELECT nope FROM config`); err == nil || !strings.HasPrefix(err.Error(), "read keys: ") {
		t.Errorf("queryRows of a bad query = %v, want \"read keys: ...\"", err)
	}
	if v, err := queryOne(ctx, d.db, "key a", scanString, `SELECT value FROM config WHERE key = ?`, "a"); err != nil || v != "1" {
		t.Errorf("queryOne(a) = %q, %v, want 1", v, err)
	}
	if _, err := queryOne(ctx, d.db, "key x", scanString, `SELECT value FROM config WHERE key = ?`, "x"); !errors.Is(err, ErrNotFound) || err.Error() != "key x: not found" {
		t.Errorf("queryOne(x) = %v, want \"key x: not found\" wrapping ErrNotFound", err)
	}
	if _, err := queryOne(ctx, d.db, "key a", failScan, `SELECT value FROM config`); errors.Is(err, ErrNotFound) || err == nil || err.Error() != "read key a: boom" {
		t.Errorf("queryOne with a failing scan = %v, want \"read key a: boom\"", err)
	}

	// The queries below need the in-memory database's one connection: a scan that fails
	// without reading its row must not keep it (they would hang).

	// The messages the callers see are those the hand-written loops gave.
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"GetToken", second(d.GetToken(ctx, "n1")), "join token for n1: not found"},
		{"GetTrust", second(d.GetTrust(ctx, "ff")), "trusted certificate ff: not found"},
		{"GetMember", second(d.GetMember(ctx, "n1")), "member n1: not found"},
		{"EndStep", d.EndStep(ctx, 99, nil), "journal entry 99: not found"},
	} {
		if !errors.Is(c.err, ErrNotFound) || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s of a missing row = %v, want %q wrapping ErrNotFound", c.name, c.err, c.want)
		}
	}
	all, err := d.AllConfig(ctx)
	if err != nil || len(all) < 3 || all["a"] != "1" || all["c"] != "3" {
		t.Errorf("AllConfig() = %v, %v, want a=1 b=2 c=3 among them", all, err)
	}
	if v, ok, err := d.GetConfig(ctx, "nope"); v != "" || ok || err != nil {
		t.Errorf("GetConfig(nope) = %q, %v, %v, want \"\", false, nil", v, ok, err)
	}
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	for _, n := range []string{"n3", "n1", "n2"} {
		if err := d.AddMember(ctx, MemberRecord{Name: n, Address: n, Fingerprint: "f" + n, JoinedAt: t0}); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := d.ListMembers(ctx)
	var names []string
	for _, m := range ms {
		names = append(names, m.Name)
	}
	if err != nil || !slices.Equal(names, []string{"n1", "n2", "n3"}) {
		t.Errorf("ListMembers() = %v, %v, want n1 n2 n3 in order", names, err)
	}
}

func second[T any](_ T, err error) error { return err }
