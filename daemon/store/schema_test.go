package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osdcloud/osd/bootstrap/fsutil"
)

func TestEveryUpdateAppliesOnFreshDatabase(t *testing.T) {
	ctx := context.Background()
	want := map[int][]string{
		1: {"schema", "config", "journal", "steps"},
		2: {"schema", "config", "journal", "steps", "journal_step", "journal_state"},
		3: {"schema", "config", "journal", "steps", "journal_step", "journal_state", "tokens", "trust", "members"},
		4: {"schema", "config", "journal", "steps", "journal_step", "journal_state", "tokens", "trust", "members", "removed_members"},
		5: {"schema", "config", "journal", "journal_step", "journal_state", "tokens", "trust", "members", "removed_members"},
		6: {"schema", "config", "journal", "journal_step", "journal_state", "tokens", "trust", "members", "removed_members"},
		7: {"schema", "config", "journal", "journal_step", "journal_state", "tokens", "trust", "members", "removed_members", "host"},
		8: {"schema", "config", "journal", "journal_step", "journal_state", "tokens", "trust", "members", "removed_members", "host"},
	}
	for n := 0; n <= len(updates); n++ {
		for _, kind := range []string{"memory", "file"} {
			t.Run(kind+"/"+string(rune('0'+n)), func(t *testing.T) {
				var d *DB
				if kind == "memory" {
					var err error
					d, err = openMemory(ctx, updates[:n])
					if err != nil {
						t.Fatalf("openMemory(updates[:%d]) = %v, want nil", n, err)
					}
					t.Cleanup(func() { d.Close() })
				} else {
					d, _ = openTemp(t, updates[:n])
				}
				v, err := d.SchemaVersion(ctx)
				if err != nil || v != n {
					t.Fatalf("SchemaVersion() = %d, %v, want %d, nil", v, err, n)
				}
				got := tables(t, d)
				for _, name := range want[n] {
					if !got[name] {
						t.Errorf("after %d updates tables = %v, want %q", n, got, name)
					}
				}
			})
		}
	}
	if d, _ := openMemory(ctx, updates); tables(t, d)["steps"] {
		t.Error("the steps table is still there after every update, want it dropped")
	}
	if LatestSchemaVersion() != len(want) {
		t.Errorf("LatestSchemaVersion() = %d, want %d (add the new update to this test)", LatestSchemaVersion(), len(want))
	}
}

func TestConnectionSettings(t *testing.T) {
	d, path := openTemp(t, updates)
	ctx := context.Background()
	checks := []struct {
		pragma string
		want   string
	}{
		{"journal_mode", "wal"},
		{"foreign_keys", "1"},
		{"busy_timeout", "5000"},
	}
	for _, c := range checks {
		t.Run(c.pragma, func(t *testing.T) {
			var got string
			if err := d.db.QueryRowContext(ctx, "PRAGMA "+c.pragma).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("PRAGMA %s = %s, want %s", c.pragma, got, c.want)
			}
		})
	}
	if err := d.SetConfig(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal"} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatalf("stat %s: %v", p, err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("mode of %s = %v, want 0600", p, st.Mode().Perm())
		}
	}
	st, err := os.Stat(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o700 {
		t.Errorf("mode of created parent %s = %v, want 0700", filepath.Dir(path), st.Mode().Perm())
	}
}

func TestOpenTightensLooseMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "osd.db")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open() = %v, want nil", err)
	}
	d.Close()
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode after Open = %v, want 0600", st.Mode().Perm())
	}
}

func TestPathWithURICharacters(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "we?ird#dir%20", "osd.db")
	d, err := Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open(%q) = %v, want nil", path, err)
	}
	defer d.Close()
	if err := d.SetConfig(context.Background(), "a", "b"); err != nil {
		t.Fatal(err)
	}
	d.Close()
	// The data went into that exact file (closing checkpoints the WAL into it), and no
	// other file was created anywhere under the test directory.
	b, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(b, []byte("SQLite format 3\x00")) || !bytes.Contains(b, []byte("CREATE TABLE config")) {
		t.Errorf("content of %q = %d bytes, %v, want an SQLite database with the schema", path, len(b), err)
	}
	var files []string
	filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if len(files) != 1 || files[0] != path {
		t.Errorf("files under the test directory = %q, want only %q", files, path)
	}
}

func TestReopenIsNoop(t *testing.T) {
	ctx := context.Background()
	d, path := openTemp(t, updates)
	if err := d.SetConfig(ctx, "name", "node1"); err != nil {
		t.Fatal(err)
	}
	d.Close()

	d2, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("Open() again = %v, want nil", err)
	}
	defer d2.Close()
	var rows int
	if err := d2.db.QueryRow(`SELECT COUNT(*) FROM schema`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != len(updates) {
		t.Errorf("schema rows after reopen = %d, want %d", rows, len(updates))
	}
	if v, _, _ := d2.GetConfig(ctx, "name"); v != "node1" {
		t.Errorf("GetConfig(name) after reopen = %q, want node1", v)
	}
	if _, err := os.Stat(path + ".bak"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat(.bak) after no-op reopen = %v, want not exist", err)
	}
}

func TestUpgradeFromV1KeepsDataAndBacksUp(t *testing.T) {
	ctx := context.Background()
	old, path := openTemp(t, updates[:1])
	if err := old.SetConfig(ctx, "name", "node1"); err != nil {
		t.Fatal(err)
	}
	id, err := old.BeginStep(ctx, "run1", "ovs")
	if err != nil {
		t.Fatal(err)
	}
	// The old handle stays open, so its writes are still in the WAL: the backup must
	// checkpoint them into the main file before copying.
	if _, err := os.Stat(path + "-wal"); err != nil {
		t.Fatalf("stat(-wal) = %v, want the WAL to hold the writes", err)
	}

	d, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("Open() upgrade = %v, want nil", err)
	}
	defer d.Close()
	if v, _ := d.SchemaVersion(ctx); v != LatestSchemaVersion() {
		t.Errorf("SchemaVersion() after upgrade = %d, want %d", v, LatestSchemaVersion())
	}
	if v, ok, _ := d.GetConfig(ctx, "name"); !ok || v != "node1" {
		t.Errorf("GetConfig(name) after upgrade = %q, %v, want node1, true", v, ok)
	}
	if got, _ := d.InterruptedSteps(ctx); len(got) != 1 || got[0].ID != id {
		t.Errorf("InterruptedSteps() after upgrade = %+v, want entry %d", got, id)
	}
	if !tables(t, d)["journal_step"] {
		t.Error("journal_step index missing after upgrade")
	}

	// The backup is the version-1 database with the data.
	st, err := os.Stat(path + ".bak")
	if err != nil {
		t.Fatalf("stat(.bak) = %v, want a backup", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode of .bak = %v, want 0600", st.Mode().Perm())
	}
	copyPath := filepath.Join(t.TempDir(), "restored.db")
	if err := fsutil.CopyFile(path+".bak", copyPath, 0o600); err != nil {
		t.Fatal(err)
	}
	bak, err := open(ctx, copyPath, updates[:1])
	if err != nil {
		t.Fatalf("open(backup, v1) = %v, want nil", err)
	}
	defer bak.Close()
	if v, _ := bak.SchemaVersion(ctx); v != 1 {
		t.Errorf("backup SchemaVersion() = %d, want 1", v)
	}
	if v, _, _ := bak.GetConfig(ctx, "name"); v != "node1" {
		t.Errorf("backup GetConfig(name) = %q, want node1", v)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	ctx := context.Background()
	d, path := openTemp(t, updates)
	future := LatestSchemaVersion() + 1
	if _, err := d.db.Exec(`INSERT INTO schema(version, updated_at) VALUES (?, 0)`, future); err != nil {
		t.Fatal(err)
	}
	d.Close()
	_, err := Open(ctx, path)
	if err == nil {
		t.Fatal("Open(newer database) = nil, want refusal")
	}
	want := fmt.Sprintf("database schema version %d is newer than this osd supports (%d); upgrade osd", future, LatestSchemaVersion())
	if !strings.Contains(err.Error(), want) {
		t.Errorf("Open(newer database) = %q, want it to contain %q", err, want)
	}
}

func TestFailingUpdateRollsBack(t *testing.T) {
	ctx := context.Background()
	bad := append(append([]update{}, updates...), func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE half(x)`); err != nil {
			return err
		}
		return errors.New("boom")
	})
	_, path := openTemp(t, updates)
	_, err := open(ctx, path, bad)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("from version %d to %d: boom", len(updates), len(updates)+1)) {
		t.Fatalf("open(failing update) = %v, want a wrapped boom", err)
	}
	d, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if tables(t, d)["half"] {
		t.Error("table from the failed update exists, want it rolled back")
	}
	if v, _ := d.SchemaVersion(ctx); v != LatestSchemaVersion() {
		t.Errorf("SchemaVersion() after failed update = %d, want %d", v, LatestSchemaVersion())
	}
}

// TestUpgradeKeepsMembersWithoutHostname: a member recorded before members had a
// hostname keeps working after the update, with none recorded.
func TestUpgradeKeepsMembersWithoutHostname(t *testing.T) {
	ctx := context.Background()
	old, path := openTemp(t, updates[:5])
	if _, err := old.db.ExecContext(ctx, `INSERT INTO members(name, address, fingerprint, roles, joined_at) VALUES ('node2', '10.0.0.2:7443', 'fp2', 'compute', 1)`); err != nil {
		t.Fatal(err)
	}
	old.Close()
	d, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("Open() upgrade = %v, want nil", err)
	}
	defer d.Close()
	m, err := d.GetMember(ctx, "node2")
	if err != nil || m.Hostname != "" || m.Fingerprint != "fp2" || len(m.Roles) != 1 {
		t.Errorf("GetMember(node2) after upgrade = %+v, %v, want the old member with no hostname", m, err)
	}
}

// TestUpgradeKeepsHostWithoutRelease: a host record from before releases were recorded
// reads back whole with no release (state.ReleaseOf takes that as the release osd
// deployed then), and a release written after the update is kept.
func TestUpgradeKeepsHostWithoutRelease(t *testing.T) {
	ctx := context.Background()
	old, path := openTemp(t, updates[:7])
	if _, err := old.db.ExecContext(ctx, `UPDATE host SET initialized = 1, goal = 'openstack', storage_backend = 'ceph' WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	old.Close()
	d, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("Open() upgrade = %v, want nil", err)
	}
	defer d.Close()
	h, err := d.Host(ctx)
	if err != nil || !h.Initialized || h.Goal != "openstack" || h.Storage.Backend != "ceph" || h.Release != "" {
		t.Fatalf("Host() after upgrade = %+v, %v, want the old initialized record with no release", h, err)
	}
	if err := d.UpdateHost(ctx, func(h *Host) error { h.Release = "epoxy"; return nil }); err != nil {
		t.Fatal(err)
	}
	if h, err := d.Host(ctx); err != nil || h.Release != "epoxy" || h.Storage.Backend != "ceph" {
		t.Errorf("Host() after recording a release = %+v, %v, want release epoxy and the rest kept", h, err)
	}
}
