package store

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/osdcloud/osd/bootstrap/fsutil"
)

// update brings the schema from version i to i+1, where i is its index in updates.
type update func(ctx context.Context, tx *sql.Tx) error

// SchemaVersion returns the version the database is at (the number of updates applied).
func (d *DB) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	if err := d.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// LatestSchemaVersion is the schema version this binary writes.
func LatestSchemaVersion() int { return len(updates) }

func schemaVersion(ctx context.Context, tx *sql.Tx) (int, error) {
	var v int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// migrate applies the pending updates, each in its own transaction, backing the file up
// first when it already held data.
func (d *DB) migrate(ctx context.Context, ups []update, existed bool) error {
	var current int
	err := d.Transaction(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema (
			version INTEGER PRIMARY KEY,
			updated_at INTEGER NOT NULL
		)`); err != nil {
			return fmt.Errorf("create schema table: %w", err)
		}
		var err error
		current, err = schemaVersion(ctx, tx)
		return err
	})
	if err != nil {
		return err
	}
	if current > len(ups) {
		return fmt.Errorf("database schema version %d is newer than this osd supports (%d); upgrade osd", current, len(ups))
	}
	if current == len(ups) {
		return nil
	}
	if existed && current > 0 && d.path != "" {
		if err := d.backup(ctx); err != nil {
			return err
		}
	}
	if d.path != "" {
		ctx = withStateDir(ctx, filepath.Dir(d.path))
	}
	for v := current; v < len(ups); v++ {
		err := d.Transaction(ctx, func(ctx context.Context, tx *sql.Tx) error {
			if err := ups[v](ctx, tx); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO schema(version, updated_at) VALUES (?, ?)`, v+1, now())
			return err
		})
		if err != nil {
			return fmt.Errorf("update database schema from version %d to %d: %w", v, v+1, err)
		}
		slog.Debug("state database schema updated", "path", d.path, "version", v+1)
	}
	return nil
}

// backup checkpoints the WAL into the main file and copies it to PATH.bak atomically.
func (d *DB) backup(ctx context.Context) error {
	if _, err := d.db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return fmt.Errorf("checkpoint before backup: %w", err)
	}
	if err := fsutil.CopyFile(d.path, d.path+".bak", 0o600); err != nil {
		return fmt.Errorf("back up state database: %w", err)
	}
	slog.Info("state database backed up before schema update", "backup", d.path+".bak")
	return nil
}
