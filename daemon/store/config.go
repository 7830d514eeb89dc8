package store

import (
	"context"
	"errors"
	"fmt"
)

// GetConfig returns the value stored under key and whether it exists.
func (d *DB) GetConfig(ctx context.Context, key string) (string, bool, error) {
	value, err := queryOne(ctx, d.db, fmt.Sprintf("config %q", key), scanString, `SELECT value FROM config WHERE key = ?`, key)
	if errors.Is(err, ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
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
	kvs, err := queryRows(ctx, d.db, "read config", func(row rowScanner) ([2]string, error) {
		var kv [2]string
		err := row.Scan(&kv[0], &kv[1])
		return kv, err
	}, `SELECT key, value FROM config ORDER BY key`)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		out[kv[0]] = kv[1]
	}
	return out, nil
}
