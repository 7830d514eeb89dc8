// Package store owns the daemon's node-local state: one SQLite database under the state dir
// (the host record, configuration, the step journal, the cluster's tokens, trust and
// members).
//
// Open applies the append-only list of schema updates in updates.go, each in its own
// transaction, after backing up an existing database to PATH.bak. A database written by a
// newer osd is refused rather than guessed at.
//
// The handle uses a single connection, so writers from many goroutines queue inside
// database/sql instead of failing with SQLITE_BUSY; the busy timeout covers other processes.
// Consequence: inside a Transaction callback use only the given *sql.Tx, never the DB's own
// helpers, or the callback waits for itself.
//
// Times are stored as INTEGER Unix milliseconds (UTC).
package store
