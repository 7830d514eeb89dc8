package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// GetConfig returns the value stored under key and whether it exists.
func (d *DB) GetConfig(ctx context.Context, key string) (string, bool, error) {
	var value string
	err := d.db.QueryRowContext(ctx, `SELECT value FROM config WHERE key = ?`, key).Scan(&value)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read config %q: %w", key, err)
	}
	return value, true, nil
}

// SetConfig stores value under key, replacing any previous value.
func (d *DB) SetConfig(ctx context.Context, key, value string) error {
	_, err := d.db.ExecContext(ctx,
		`INSERT INTO config(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`,
		key, value)
	if err != nil {
		return fmt.Errorf("write config %q: %w", key, err)
	}
	return nil
}

// DeleteConfig removes key; removing a missing key is not an error.
func (d *DB) DeleteConfig(ctx context.Context, key string) error {
	if _, err := d.db.ExecContext(ctx, `DELETE FROM config WHERE key = ?`, key); err != nil {
		return fmt.Errorf("delete config %q: %w", key, err)
	}
	return nil
}

// AllConfig returns every stored key and value.
func (d *DB) AllConfig(ctx context.Context) (map[string]string, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT key, value FROM config ORDER BY key`)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("read config: %w", err)
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return out, nil
}
