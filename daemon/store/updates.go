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
	updateFromV6,
	updateFromV7,
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

// updateFromV6 creates the host record (Host: one row, read and written whole) and folds
// into it what a host kept before in separate configuration keys and in files: the keys
// of osd init's request, the storage decision, the external network and the tunnel
// interface, the join's record (STATE/cluster/join.json) and what netsetup saved
// (STATE/host/netsetup.json, STATE/host/tunnel/netsetup.json). The keys go in the same
// transaction; the files once it committed (removeFolded).
func updateFromV6(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, `
CREATE TABLE host (
	id                   INTEGER PRIMARY KEY CHECK(id = 1),
	version              INTEGER NOT NULL,
	initialized          INTEGER NOT NULL DEFAULT 0,
	goal                 TEXT NOT NULL DEFAULT '',
	tunnel_interface     TEXT NOT NULL DEFAULT '',
	ext_wanted_bridge    TEXT,
	ext_wanted_cidr      TEXT,
	ext_wanted_gateway   TEXT,
	ext_wanted_interface TEXT,
	ext_bridge           TEXT,
	ext_cidr             TEXT,
	ext_gateway          TEXT,
	ext_interface        TEXT,
	storage_wanted       TEXT NOT NULL DEFAULT '',
	storage_size_wanted  INTEGER NOT NULL DEFAULT 0,
	storage_backend      TEXT NOT NULL DEFAULT '',
	storage_reason       TEXT NOT NULL DEFAULT '',
	storage_size         INTEGER NOT NULL DEFAULT 0,
	join_state           TEXT NOT NULL DEFAULT '' CHECK(join_state IN ('','joining','member','removed')),
	join_name            TEXT NOT NULL DEFAULT '',
	join_secret          TEXT NOT NULL DEFAULT '',
	join_roles           TEXT NOT NULL DEFAULT '',
	join_fingerprint     TEXT NOT NULL DEFAULT '',
	join_addresses       TEXT NOT NULL DEFAULT '',
	join_server          TEXT NOT NULL DEFAULT '',
	join_address         TEXT NOT NULL DEFAULT '',
	join_k3s_url         TEXT NOT NULL DEFAULT '',
	join_k3s_token       TEXT NOT NULL DEFAULT '',
	join_hostname        TEXT NOT NULL DEFAULT '',
	net_external         TEXT NOT NULL DEFAULT '',
	net_tunnel           TEXT NOT NULL DEFAULT '',
	updated_at           INTEGER NOT NULL
);`); err != nil {
		return err
	}
	h, err := legacyHost(ctx, tx, stateDirOf(ctx))
	if err != nil {
		return err
	}
	if err := writeHostColumns(ctx, tx, h, hostColumnsV7); err != nil {
		return err
	}
	for _, k := range legacyKeys {
		if _, err := tx.ExecContext(ctx, `DELETE FROM config WHERE key = ?`, k); err != nil {
			return err
		}
	}
	return nil
}

// updateFromV7 records the OpenStack release a host's cloud runs (Host.Release). A host
// initialized before releases were recorded keeps an empty release, which means Zed, the only
// release osd deployed then (state.ReleaseOf): nothing moves its databases forward.
func updateFromV7(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `ALTER TABLE host ADD COLUMN release TEXT NOT NULL DEFAULT '';`)
	return err
}
