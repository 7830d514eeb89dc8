package store

import (
	"context"
	"database/sql"
)

// updates is the append-only history of the schema: updates[i] moves version i to i+1.
// Never edit or reorder an entry that has shipped; append a new one.
var updates = []update{
	updateFromV0,
	updateFromV1,
}

// updateFromV0 creates the configuration, the step journal and the completed-step record.
func updateFromV0(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `
CREATE TABLE config (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
CREATE TABLE journal (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	run         TEXT NOT NULL,
	step        TEXT NOT NULL,
	state       TEXT NOT NULL CHECK(state IN ('started','finished','failed','reverted')),
	detail      TEXT NOT NULL DEFAULT '',
	started_at  INTEGER NOT NULL,
	finished_at INTEGER
);
CREATE TABLE steps (
	step        TEXT PRIMARY KEY,
	fingerprint TEXT NOT NULL,
	finished_at INTEGER NOT NULL
);`)
	return err
}

// updateFromV1 indexes the journal by step and by state (interrupted-step lookups).
func updateFromV1(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `
CREATE INDEX journal_step ON journal(step);
CREATE INDEX journal_state ON journal(state);`)
	return err
}
