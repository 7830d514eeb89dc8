package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrExists is returned (wrapped) when a row the caller wants to create already exists.
var ErrExists = errors.New("already exists")

// TokenRecord is one issued join token. Zero ConsumedAt/RevokedAt mean "not yet".
type TokenRecord struct {
	Name       string
	SecretHash string
	Roles      []string // the roles the joining node gets (empty: the default roles)
	CreatedAt  time.Time
	ExpiresAt  time.Time
	ConsumedAt time.Time
	RevokedAt  time.Time
}

// Live reports whether the token can still be used at now.
func (t TokenRecord) Live(now time.Time) bool {
	return t.ConsumedAt.IsZero() && t.RevokedAt.IsZero() && now.Before(t.ExpiresAt)
}

// TrustRecord is one trusted certificate: an API client's or a member's.
type TrustRecord struct {
	Fingerprint string
	Name        string
	Kind        string // "client" or "member"
	CertPEM     string
	AddedAt     time.Time
}

// MemberRecord is one member of the cluster.
type MemberRecord struct {
	Name          string
	Address       string
	Fingerprint   string
	Roles         []string
	JoinedAt      time.Time
	LastHeartbeat time.Time // zero until the first heartbeat
	Hostname      string    // the member host's OS hostname ("" when its joiner sent none)
}

func millisOrNull(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMilli(), Valid: true}
}

func timeOrZero(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return fromMillis(n.Int64)
}

// InsertToken stores a new token. In one transaction it refuses (ErrExists) a name that is
// already a member or that holds a token still live at rec.CreatedAt; a dead token of the
// same name (expired, consumed or revoked) is replaced.
func (d *DB) InsertToken(ctx context.Context, rec TokenRecord) error {
	return d.Transaction(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if ok, err := memberExists(ctx, tx, rec.Name); err != nil {
			return err
		} else if ok {
			return fmt.Errorf("store join token for %s: %s is a member: %w", rec.Name, rec.Name, ErrExists)
		}
		old, err := scanToken(tx.QueryRowContext(ctx, tokenSelect+` WHERE name = ?`, rec.Name))
		switch {
		case err == nil && old.Live(rec.CreatedAt):
			return fmt.Errorf("store join token for %s: a live token: %w", rec.Name, ErrExists)
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("store join token for %s: %w", rec.Name, err)
		}
		_, err = tx.ExecContext(ctx, `INSERT OR REPLACE INTO tokens(name, secret_hash, roles, created_at, expires_at, consumed_at, revoked_at)
			VALUES (?, ?, ?, ?, ?, NULL, NULL)`, rec.Name, rec.SecretHash, strings.Join(rec.Roles, ","), rec.CreatedAt.UnixMilli(), rec.ExpiresAt.UnixMilli())
		if err != nil {
			return fmt.Errorf("store join token for %s: %w", rec.Name, err)
		}
		return nil
	})
}

const tokenSelect = `SELECT name, secret_hash, roles, created_at, expires_at, consumed_at, revoked_at FROM tokens`

func scanToken(row rowScanner) (TokenRecord, error) {
	var t TokenRecord
	var roles string
	var created, expires int64
	var consumed, revoked sql.NullInt64
	if err := row.Scan(&t.Name, &t.SecretHash, &roles, &created, &expires, &consumed, &revoked); err != nil {
		return TokenRecord{}, err
	}
	if roles != "" {
		t.Roles = strings.Split(roles, ",")
	}
	t.CreatedAt, t.ExpiresAt = fromMillis(created), fromMillis(expires)
	t.ConsumedAt, t.RevokedAt = timeOrZero(consumed), timeOrZero(revoked)
	return t, nil
}

// GetToken returns the token issued for name, or an error wrapping ErrNotFound.
func (d *DB) GetToken(ctx context.Context, name string) (TokenRecord, error) {
	return queryOne(ctx, d.db, "join token for "+name, scanToken, tokenSelect+` WHERE name = ?`, name)
}

// ListTokens returns every stored token, by name.
func (d *DB) ListTokens(ctx context.Context) ([]TokenRecord, error) {
	return queryRows(ctx, d.db, "read join tokens", scanToken, tokenSelect+` ORDER BY name`)
}

// RevokeToken marks the unused, unrevoked token of name revoked at. The row stays until
// it expires so a late join attempt is told "revoked". ErrNotFound when there is none.
func (d *DB) RevokeToken(ctx context.Context, name string, at time.Time) error {
	res, err := d.db.ExecContext(ctx, `UPDATE tokens SET revoked_at = ?
		WHERE name = ? AND revoked_at IS NULL AND consumed_at IS NULL`, at.UnixMilli(), name)
	if err != nil {
		return fmt.Errorf("revoke join token for %s: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("unused join token for %s: %w", name, ErrNotFound)
	}
	return nil
}

// ConsumeToken marks the unused, unrevoked token of name consumed at; ErrNotFound when
// there is none.
func (d *DB) ConsumeToken(ctx context.Context, name string, at time.Time) error {
	return d.Transaction(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return consumeToken(ctx, tx, name, at)
	})
}

func consumeToken(ctx context.Context, tx *sql.Tx, name string, at time.Time) error {
	res, err := tx.ExecContext(ctx, `UPDATE tokens SET consumed_at = ?
		WHERE name = ? AND revoked_at IS NULL AND consumed_at IS NULL`, at.UnixMilli(), name)
	if err != nil {
		return fmt.Errorf("consume join token for %s: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("unused join token for %s: %w", name, ErrNotFound)
	}
	return nil
}

// PurgeTokens deletes every token that expired at or before before, whatever its state,
// and returns how many it deleted.
func (d *DB) PurgeTokens(ctx context.Context, before time.Time) (int64, error) {
	res, err := d.db.ExecContext(ctx, `DELETE FROM tokens WHERE expires_at <= ?`, before.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("purge expired join tokens: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// AddTrust stores a trusted certificate; ErrExists if its fingerprint is already trusted.
func (d *DB) AddTrust(ctx context.Context, rec TrustRecord) error {
	return d.Transaction(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return addTrust(ctx, tx, rec)
	})
}

func addTrust(ctx context.Context, tx *sql.Tx, rec TrustRecord) error {
	res, err := tx.ExecContext(ctx, `INSERT INTO trust(fingerprint, name, kind, cert_pem, added_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT(fingerprint) DO NOTHING`,
		rec.Fingerprint, rec.Name, rec.Kind, rec.CertPEM, rec.AddedAt.UnixMilli())
	if err != nil {
		return fmt.Errorf("trust certificate %s (%s): %w", rec.Fingerprint, rec.Name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("certificate %s: %w", rec.Fingerprint, ErrExists)
	}
	return nil
}

const trustSelect = `SELECT fingerprint, name, kind, cert_pem, added_at FROM trust`

func scanTrust(row rowScanner) (TrustRecord, error) {
	var t TrustRecord
	var added int64
	if err := row.Scan(&t.Fingerprint, &t.Name, &t.Kind, &t.CertPEM, &added); err != nil {
		return TrustRecord{}, err
	}
	t.AddedAt = fromMillis(added)
	return t, nil
}

// GetTrust returns the trusted certificate with fingerprint, or an error wrapping ErrNotFound.
func (d *DB) GetTrust(ctx context.Context, fingerprint string) (TrustRecord, error) {
	return queryOne(ctx, d.db, "trusted certificate "+fingerprint, scanTrust, trustSelect+` WHERE fingerprint = ?`, fingerprint)
}

// ListTrust returns every trusted certificate, by kind and name.
func (d *DB) ListTrust(ctx context.Context) ([]TrustRecord, error) {
	return queryRows(ctx, d.db, "read trusted certificates", scanTrust, trustSelect+` ORDER BY kind, name, fingerprint`)
}

// RemoveTrust stops trusting the certificate with fingerprint; ErrNotFound if it was not.
func (d *DB) RemoveTrust(ctx context.Context, fingerprint string) error {
	res, err := d.db.ExecContext(ctx, `DELETE FROM trust WHERE fingerprint = ?`, fingerprint)
	if err != nil {
		return fmt.Errorf("remove trusted certificate %s: %w", fingerprint, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("trusted certificate %s: %w", fingerprint, ErrNotFound)
	}
	return nil
}

func memberExists(ctx context.Context, tx *sql.Tx, name string) (bool, error) {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM members WHERE name = ?`, name).Scan(&n); err != nil {
		return false, fmt.Errorf("read member %s: %w", name, err)
	}
	return n > 0, nil
}

// AddMember records a member; ErrExists if the name or fingerprint is taken.
func (d *DB) AddMember(ctx context.Context, m MemberRecord) error {
	return d.Transaction(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return addMember(ctx, tx, m)
	})
}

func addMember(ctx context.Context, tx *sql.Tx, m MemberRecord) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM members WHERE name = ? OR fingerprint = ?`,
		m.Name, m.Fingerprint).Scan(&n); err != nil {
		return fmt.Errorf("add member %s: %w", m.Name, err)
	}
	if n > 0 {
		return fmt.Errorf("member %s: %w", m.Name, ErrExists)
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO members(name, address, fingerprint, roles, joined_at, last_heartbeat, hostname)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, m.Name, m.Address, m.Fingerprint, strings.Join(m.Roles, ","),
		m.JoinedAt.UnixMilli(), millisOrNull(m.LastHeartbeat), m.Hostname)
	if err != nil {
		return fmt.Errorf("add member %s: %w", m.Name, err)
	}
	return nil
}

// CompleteJoin registers a joined member in one transaction: it consumes the member's
// token, records the member and trusts its certificate. Nothing is stored if any part
// fails (no unused token: ErrNotFound; name or certificate taken: ErrExists).
func (d *DB) CompleteJoin(ctx context.Context, m MemberRecord, cert TrustRecord, at time.Time) error {
	return d.Transaction(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := consumeToken(ctx, tx, m.Name, at); err != nil {
			return err
		}
		if err := addMember(ctx, tx, m); err != nil {
			return err
		}
		return addTrust(ctx, tx, cert)
	})
}

const memberSelect = `SELECT name, address, fingerprint, roles, joined_at, last_heartbeat, hostname FROM members`

func scanMember(row rowScanner) (MemberRecord, error) {
	var m MemberRecord
	var roles string
	var joined int64
	var beat sql.NullInt64
	if err := row.Scan(&m.Name, &m.Address, &m.Fingerprint, &roles, &joined, &beat, &m.Hostname); err != nil {
		return MemberRecord{}, err
	}
	if roles != "" {
		m.Roles = strings.Split(roles, ",")
	}
	m.JoinedAt, m.LastHeartbeat = fromMillis(joined), timeOrZero(beat)
	return m, nil
}

// GetMember returns the member called name, or an error wrapping ErrNotFound.
func (d *DB) GetMember(ctx context.Context, name string) (MemberRecord, error) {
	return queryOne(ctx, d.db, "member "+name, scanMember, memberSelect+` WHERE name = ?`, name)
}

// ListMembers returns every member, by name.
func (d *DB) ListMembers(ctx context.Context) ([]MemberRecord, error) {
	return queryRows(ctx, d.db, "read members", scanMember, memberSelect+` ORDER BY name`)
}

// RemoveMember deletes the member called name and stops trusting its certificates, in one
// transaction; the certificates are remembered as a removed member's (ListRemovedMembers)
// at at. ErrNotFound if there is no such member.
func (d *DB) RemoveMember(ctx context.Context, name string, at time.Time) error {
	return d.Transaction(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var fp string
		err := tx.QueryRowContext(ctx, `SELECT fingerprint FROM members WHERE name = ?`, name).Scan(&fp)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("member %s: %w", name, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("remove member %s: %w", name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO removed_members(fingerprint, name, removed_at) VALUES (?, ?, ?)`,
			fp, name, at.UnixMilli()); err != nil {
			return fmt.Errorf("remove member %s: %w", name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO removed_members(fingerprint, name, removed_at)
			SELECT fingerprint, name, ? FROM trust WHERE name = ? AND kind = 'member'`, at.UnixMilli(), name); err != nil {
			return fmt.Errorf("remove member %s: %w", name, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM trust WHERE name = ? AND kind = 'member'`, name); err != nil {
			return fmt.Errorf("remove member %s: %w", name, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM members WHERE name = ?`, name); err != nil {
			return fmt.Errorf("remove member %s: %w", name, err)
		}
		return nil
	})
}

// RemovedMember is a certificate of a member that was removed.
type RemovedMember struct {
	Fingerprint string
	Name        string
	RemovedAt   time.Time
}

// ListRemovedMembers returns the certificates of every removed member.
func (d *DB) ListRemovedMembers(ctx context.Context) ([]RemovedMember, error) {
	return queryRows(ctx, d.db, "read removed members", scanRemovedMember,
		`SELECT fingerprint, name, removed_at FROM removed_members ORDER BY name, fingerprint`)
}

func scanRemovedMember(row rowScanner) (RemovedMember, error) {
	var r RemovedMember
	var at int64
	if err := row.Scan(&r.Fingerprint, &r.Name, &at); err != nil {
		return RemovedMember{}, err
	}
	r.RemovedAt = fromMillis(at)
	return r, nil
}

// RenewMemberCert makes cert (a member certificate of member cert.Name) the member's
// current one, in one transaction: it is trusted and recorded as the member's, while the
// certificates the member held before stay trusted until PruneMemberCerts (so a member
// that lost the answer can still ask again). ErrNotFound if there is no such member.
func (d *DB) RenewMemberCert(ctx context.Context, cert TrustRecord) error {
	return d.Transaction(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE members SET fingerprint = ? WHERE name = ?`, cert.Fingerprint, cert.Name)
		if err != nil {
			return fmt.Errorf("renew certificate of member %s: %w", cert.Name, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("member %s: %w", cert.Name, ErrNotFound)
		}
		return addTrust(ctx, tx, cert)
	})
}

// PruneMemberCerts stops trusting every certificate of member name but its current one
// (once the member has shown it holds the current one) and returns how many it dropped.
func (d *DB) PruneMemberCerts(ctx context.Context, name string) (int64, error) {
	res, err := d.db.ExecContext(ctx, `DELETE FROM trust WHERE kind = 'member' AND name = ?
		AND fingerprint <> (SELECT fingerprint FROM members WHERE name = ?)`, name, name)
	if err != nil {
		return 0, fmt.Errorf("drop old certificates of member %s: %w", name, err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// MemberHeartbeat records that member name was heard from at; ErrNotFound if unknown.
func (d *DB) MemberHeartbeat(ctx context.Context, name string, at time.Time) error {
	res, err := d.db.ExecContext(ctx, `UPDATE members SET last_heartbeat = ? WHERE name = ?`, at.UnixMilli(), name)
	if err != nil {
		return fmt.Errorf("record heartbeat of member %s: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("member %s: %w", name, ErrNotFound)
	}
	return nil
}
