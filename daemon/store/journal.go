package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/osdcloud/osd/daemon/api"
)

// JournalEntry is one row of the step journal (the wire type, so handlers can return it).
type JournalEntry = api.JournalEntry

// BeginStep records that run started step and returns the journal entry's id. Earlier
// entries of the same step, even ones left 'started' by a crash, do not prevent it.
func (d *DB) BeginStep(ctx context.Context, run, step string) (int64, error) {
	res, err := d.db.ExecContext(ctx,
		`INSERT INTO journal(run, step, state, started_at) VALUES (?, ?, 'started', ?)`, run, step, now())
	if err != nil {
		return 0, fmt.Errorf("journal start of step %q: %w", step, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("journal start of step %q: %w", step, err)
	}
	return id, nil
}

// EndStep closes a started journal entry: finished when stepErr is nil, otherwise failed
// with stepErr's text as the detail. Ending an entry that is not 'started' is an error.
func (d *DB) EndStep(ctx context.Context, id int64, stepErr error) error {
	return d.Transaction(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return endStep(ctx, tx, id, stepErr)
	})
}

func endStep(ctx context.Context, tx *sql.Tx, id int64, stepErr error) error {
	state, detail := api.StepFinished, ""
	if stepErr != nil {
		state, detail = api.StepFailed, stepErr.Error()
	}
	cur, err := entryState(ctx, tx, id)
	if err != nil {
		return err
	}
	if cur != api.StepStarted {
		return fmt.Errorf("end journal entry %d: already %s", id, cur)
	}
	_, err = tx.ExecContext(ctx, `UPDATE journal SET state = ?, detail = ?, finished_at = ? WHERE id = ?`,
		state, detail, now(), id)
	if err != nil {
		return fmt.Errorf("end journal entry %d: %w", id, err)
	}
	return nil
}

func entryState(ctx context.Context, tx *sql.Tx, id int64) (string, error) {
	return queryOne(ctx, tx, fmt.Sprintf("journal entry %d", id), scanString, `SELECT state FROM journal WHERE id = ?`, id)
}

// RecentJournal returns up to limit journal entries, newest first; limit <= 0 means all.
func (d *DB) RecentJournal(ctx context.Context, limit int) ([]JournalEntry, error) {
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	return d.queryJournal(ctx, `SELECT id, run, step, state, detail, started_at, finished_at
		FROM journal ORDER BY id DESC LIMIT ?`, limit)
}

// InterruptedSteps returns the entries still 'started', oldest first: steps a crashed or
// killed run began and never ended (the daemon closes them as failed when it starts).
func (d *DB) InterruptedSteps(ctx context.Context) ([]JournalEntry, error) {
	return d.queryJournal(ctx, `SELECT id, run, step, state, detail, started_at, finished_at
		FROM journal WHERE state = 'started' ORDER BY id`)
}

func (d *DB) queryJournal(ctx context.Context, query string, args ...any) ([]JournalEntry, error) {
	return queryRows(ctx, d.db, "read journal", scanJournalEntry, query, args...)
}

func scanJournalEntry(row rowScanner) (JournalEntry, error) {
	var e JournalEntry
	var started int64
	var finished sql.NullInt64
	if err := row.Scan(&e.ID, &e.Run, &e.Step, &e.State, &e.Detail, &started, &finished); err != nil {
		return JournalEntry{}, err
	}
	e.StartedAt = fromMillis(started)
	if finished.Valid {
		t := fromMillis(finished.Int64)
		e.FinishedAt = &t
	}
	return e, nil
}

// CloseInterruptedSteps ends every entry still 'started' as failed with reason (a step the
// daemon was stopped or killed in the middle of: it did not finish) and returns how many.
func (d *DB) CloseInterruptedSteps(ctx context.Context, reason string) (int, error) {
	res, err := d.db.ExecContext(ctx, `UPDATE journal SET state = 'failed', detail = ?, finished_at = ? WHERE state = 'started'`, reason, now())
	if err != nil {
		return 0, fmt.Errorf("close interrupted steps: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}
