package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "github.com/mattn/go-sqlite3" // registers the "sqlite3" driver
)

// ErrNotFound is returned (wrapped) when a row the caller named does not exist.
var ErrNotFound = errors.New("not found")

// DB is the daemon's state database.
type DB struct {
	db   *sql.DB
	path string // empty for in-memory databases
}

// dsnParams are the connection settings every handle uses.
const dsnParams = "_busy_timeout=5000&_foreign_keys=on&_txlock=immediate"

// Open opens or creates the database file at path and brings its schema up to date.
func Open(ctx context.Context, path string) (*DB, error) {
	return open(ctx, path, updates)
}

func open(ctx context.Context, path string, ups []update) (*DB, error) {
	if path == "" {
		return nil, errors.New("open state database: empty path")
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open state database: %w", err)
	}
	existed, err := prepareFile(path)
	if err != nil {
		return nil, err
	}
	dsn := "file:" + uriEscape(path) + "?" + dsnParams + "&_journal_mode=WAL"
	d, err := connect(ctx, dsn, path)
	if err != nil {
		return nil, err
	}
	if err := d.migrate(ctx, ups, existed); err != nil {
		_ = d.Close()
		return nil, err
	}
	if err := d.removeFolded(ctx); err != nil {
		_ = d.Close()
		return nil, err
	}
	return d, nil
}

// OpenMemory opens a private, empty, fully migrated in-memory database, for tests.
func OpenMemory(ctx context.Context) (*DB, error) {
	return openMemory(ctx, updates)
}

func openMemory(ctx context.Context, ups []update) (*DB, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("open memory database: %w", err)
	}
	dsn := "file:osd-" + hex.EncodeToString(b[:]) + "?mode=memory&cache=shared&" + dsnParams
	d, err := connect(ctx, dsn, "")
	if err != nil {
		return nil, err
	}
	if err := d.migrate(ctx, ups, false); err != nil {
		_ = d.Close()
		return nil, err
	}
	return d, nil
}

// prepareFile creates the parent directory (0700) and the file (0600) if missing and
// tightens the mode of an existing file. It reports whether the file already held data.
func prepareFile(path string) (existed bool, err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return false, fmt.Errorf("create state directory: %w", err)
	}
	st, err := os.Stat(path)
	switch {
	case err == nil:
		if !st.Mode().IsRegular() {
			return false, fmt.Errorf("state database %s is not a regular file", path)
		}
		if st.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(path, 0o600); err != nil {
				return false, fmt.Errorf("restrict state database mode: %w", err)
			}
		}
		return st.Size() > 0, nil
	case errors.Is(err, os.ErrNotExist):
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return false, fmt.Errorf("create state database: %w", err)
		}
		return false, f.Close()
	default:
		return false, fmt.Errorf("stat state database: %w", err)
	}
}

// uriEscape makes a file path safe inside an SQLite "file:" URI.
func uriEscape(p string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(p)
}

func connect(ctx context.Context, dsn, path string) (*DB, error) {
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, fmt.Errorf("open state database: %w", err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open state database %s: %w", path, err)
	}
	return &DB{db: db, path: path}, nil
}

// Close closes the database. It is safe to call more than once.
func (d *DB) Close() error {
	return d.db.Close()
}

// Path returns the database file, or "" for an in-memory database.
func (d *DB) Path() string { return d.path }

// Transaction runs fn in one IMMEDIATE transaction: committed if fn returns nil, rolled
// back if fn returns an error or panics (the panic continues after the rollback).
func (d *DB) Transaction(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) (err error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback()
		}
	}()
	if err := fn(ctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit transaction: %w", err)
	}
	committed = true
	return nil
}

// now is the clock used for stored timestamps, in Unix milliseconds.
func now() int64 { return time.Now().UnixMilli() }

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
