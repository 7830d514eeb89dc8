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
	updateFromV2,
	updateFromV3,
	updateFromV4,
	updateFromV5,
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

// updateFromV2 creates the cluster tables: issued join tokens (only a hash of each secret),
// trusted certificates (API clients and members) and the members of the cluster.
func updateFromV2(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `
CREATE TABLE tokens (
	name        TEXT PRIMARY KEY,
	secret_hash TEXT NOT NULL,
	created_at  INTEGER NOT NULL,
	expires_at  INTEGER NOT NULL,
	consumed_at INTEGER,
	revoked_at  INTEGER
);
CREATE TABLE trust (
	fingerprint TEXT PRIMARY KEY,
	name        TEXT NOT NULL,
	kind        TEXT NOT NULL CHECK(kind IN ('client','member')),
	cert_pem    TEXT NOT NULL,
	added_at    INTEGER NOT NULL
);
CREATE TABLE members (
	name           TEXT PRIMARY KEY,
	address        TEXT NOT NULL,
	fingerprint    TEXT NOT NULL UNIQUE,
	roles          TEXT NOT NULL DEFAULT '',
	joined_at      INTEGER NOT NULL,
	last_heartbeat INTEGER
);`)
	return err
}

// updateFromV3 gives join tokens the roles the joining node will have (chosen by whoever
// issues the token, not by the joiner) and keeps the certificates of removed members, so
// that a removed node is told so explicitly rather than by a refusal it cannot tell from
// an expired certificate.
func updateFromV3(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `
ALTER TABLE tokens ADD COLUMN roles TEXT NOT NULL DEFAULT '';
CREATE TABLE removed_members (
	fingerprint TEXT PRIMARY KEY,
	name        TEXT NOT NULL,
	removed_at  INTEGER NOT NULL
);`)
	return err
}

// updateFromV4 drops the table of completed-step fingerprints: nothing ever read it (the
// steps are idempotent and check the host themselves; the journal records every run).
func updateFromV4(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `DROP TABLE steps;`)
	return err
}

// updateFromV5 records each member's OS hostname (empty for members that joined before, or
// whose joiner did not send one): OpenStack names a compute host's hypervisor by it, so
// the cluster refuses a second host of the same hostname.
func updateFromV5(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `ALTER TABLE members ADD COLUMN hostname TEXT NOT NULL DEFAULT '';`)
	return err
}
