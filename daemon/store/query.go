package store

import (
	"context"
	"database/sql"
	"fmt"
)

// querier is what both the database and a transaction offer for reading.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// rowScanner is one row to scan: a *sql.Row or the current row of *sql.Rows.
type rowScanner interface{ Scan(dest ...any) error }

// queryRows runs query and returns every row scanned by scan, in the order the query
// returns them (nil when it returns none). Any error of the query, a scan or the iteration
// is returned as "what: err".
func queryRows[T any](ctx context.Context, q querier, what string, scan func(rowScanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// queryOne runs query and returns its first row scanned by scan. No row is "what:
// ErrNotFound" (wrapped); any other error is "read what: err". The rows are closed however
// scan ends (a *sql.Row would hold its connection until scanned).
func queryOne[T any](ctx context.Context, q querier, what string, scan func(rowScanner) (T, error), query string, args ...any) (T, error) {
	var zero T
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return zero, fmt.Errorf("read %s: %w", what, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return zero, fmt.Errorf("read %s: %w", what, err)
		}
		return zero, fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	v, err := scan(rows)
	if err != nil {
		return zero, fmt.Errorf("read %s: %w", what, err)
	}
	return v, nil
}

// scanString scans a row of one text column.
func scanString(row rowScanner) (string, error) {
	var s string
	err := row.Scan(&s)
	return s, err
}
