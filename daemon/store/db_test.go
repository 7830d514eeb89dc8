package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/mattn/go-sqlite3"
)

func TestTransactionRollback(t *testing.T) {
	ctx := context.Background()
	d := newMemory(t)
	boom := errors.New("boom")
	tests := []struct {
		name    string
		fn      func(ctx context.Context, tx *sql.Tx) error
		wantErr error
		panics  bool
	}{
		{name: "error", wantErr: boom, fn: func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO config VALUES ('error', 'x')`); err != nil {
				return err
			}
			return boom
		}},
		{name: "panic", panics: true, fn: func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO config VALUES ('panic', 'x')`); err != nil {
				return err
			}
			panic("boom")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					r := recover()
					if (r != nil) != tt.panics {
						t.Errorf("Transaction panic = %v, want panic %v", r, tt.panics)
					}
				}()
				err = d.Transaction(ctx, tt.fn)
			}()
			if !tt.panics && !errors.Is(err, tt.wantErr) {
				t.Errorf("Transaction() = %v, want %v", err, tt.wantErr)
			}
			if _, ok, _ := d.GetConfig(ctx, tt.name); ok {
				t.Errorf("GetConfig(%s) found a row, want it rolled back", tt.name)
			}
			// The connection is usable afterwards (no transaction left open).
			if err := d.SetConfig(ctx, "after-"+tt.name, "ok"); err != nil {
				t.Errorf("SetConfig after rollback = %v, want nil", err)
			}
		})
	}
}

func TestTransactionCommits(t *testing.T) {
	ctx := context.Background()
	d := newMemory(t)
	err := d.Transaction(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO config VALUES ('a', '1'), ('b', '2')`)
		return err
	})
	if err != nil {
		t.Fatalf("Transaction() = %v, want nil", err)
	}
	got, err := d.AllConfig(ctx)
	if err != nil || len(got) != 2 || got["a"] != "1" || got["b"] != "2" {
		t.Errorf("AllConfig() = %v, %v, want a=1 b=2", got, err)
	}
}

// Writers in many goroutines on two independent handles of one file (two connections,
// as two processes would have) all succeed: no SQLITE_BUSY, no lost update.
func TestConcurrentWritersDoNotGetBusy(t *testing.T) {
	ctx := context.Background()
	d1, path := openTemp(t, updates)
	d2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d2.Close() })
	if err := d1.SetConfig(ctx, "counter", "0"); err != nil {
		t.Fatal(err)
	}
	const goroutines, perG = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*perG)
	for g := 0; g < goroutines; g++ {
		d := d1
		if g%2 == 1 {
			d = d2
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perG; i++ {
				err := d.Transaction(ctx, func(ctx context.Context, tx *sql.Tx) error {
					var v string
					if err := tx.QueryRowContext(ctx, `SELECT value FROM config WHERE key = 'counter'`).Scan(&v); err != nil {
						return err
					}
					n, _ := strconv.Atoi(v)
					_, err := tx.ExecContext(ctx, `UPDATE config SET value = ? WHERE key = 'counter'`, strconv.Itoa(n+1))
					return err
				})
				if err != nil {
					errs <- err
				}
				if _, err := d.BeginStep(ctx, "run", fmt.Sprintf("g%d", g)); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent write = %v, want nil", err)
	}
	v, _, _ := d1.GetConfig(ctx, "counter")
	if v != strconv.Itoa(goroutines*perG) {
		t.Errorf("counter = %s, want %d", v, goroutines*perG)
	}
	if got, _ := d2.RecentJournal(ctx, 0); len(got) != goroutines*perG {
		t.Errorf("len(RecentJournal(0)) = %d, want %d", len(got), goroutines*perG)
	}
}

// An uncommitted transaction whose connection goes away leaves everything committed
// intact and the database writable.
func TestCloseMidTransactionKeepsCommitted(t *testing.T) {
	ctx := context.Background()
	d, path := openTemp(t, updates)
	if err := d.SetConfig(ctx, "committed", "yes"); err != nil {
		t.Fatal(err)
	}
	d.Close()

	// A second writer on its own raw connection: begins, writes, and is closed without
	// committing (what a crash between BEGIN and COMMIT looks like to SQLite).
	conn, err := (&sqlite3.SQLiteDriver{}).Open("file:" + uriEscape(path) + "?" + dsnParams)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin() //nolint:staticcheck // the raw driver API is the point here
	if err != nil {
		t.Fatal(err)
	}
	_ = tx
	for _, q := range []string{
		`INSERT INTO config VALUES ('uncommitted', 'x')`,
		`UPDATE config SET value = 'changed' WHERE key = 'committed'`,
	} {
		if _, err := conn.(driver.Execer).Exec(q, nil); err != nil { //nolint:staticcheck
			t.Fatalf("Exec(%s) = %v", q, err)
		}
	}
	if err := conn.Close(); err != nil {
		t.Fatalf("Close() mid-transaction = %v, want nil", err)
	}

	d2, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("Open() after abandoned transaction = %v, want nil", err)
	}
	defer d2.Close()
	assertOnlyCommitted(t, d2)
}

func assertOnlyCommitted(t *testing.T, d *DB) {
	t.Helper()
	ctx := context.Background()
	if v, ok, err := d.GetConfig(ctx, "committed"); err != nil || !ok || v != "yes" {
		t.Errorf("GetConfig(committed) = %q, %v, %v, want yes, true, nil", v, ok, err)
	}
	if _, ok, err := d.GetConfig(ctx, "uncommitted"); err != nil || ok {
		t.Errorf("GetConfig(uncommitted) found = %v, %v, want false, nil", ok, err)
	}
	if err := d.SetConfig(ctx, "writable", "yes"); err != nil {
		t.Errorf("SetConfig() after crash = %v, want nil", err)
	}
}
