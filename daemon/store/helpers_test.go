package store

import (
	"context"
	"path/filepath"
	"testing"
)

// openTemp opens a fresh database file in a test directory, closed at cleanup.
func openTemp(t *testing.T, ups []update) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state", "osd.db")
	d, err := open(context.Background(), path, ups)
	if err != nil {
		t.Fatalf("open(%s) = %v, want nil", path, err)
	}
	t.Cleanup(func() { d.Close() })
	return d, path
}

func newMemory(t *testing.T) *DB {
	t.Helper()
	d, err := OpenMemory(context.Background())
	if err != nil {
		t.Fatalf("OpenMemory() = %v, want nil", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func tables(t *testing.T, d *DB) map[string]bool {
	t.Helper()
	rows, err := d.db.Query(`SELECT name FROM sqlite_master WHERE type IN ('table','index') AND name NOT LIKE 'sqlite_%'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[n] = true
	}
	return out
}
