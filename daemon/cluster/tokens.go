package cluster

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/store"
)

// DefaultTokenTTL is how long a join token lives unless asked otherwise.
const DefaultTokenTTL = time.Hour

// MaxTokenTTL bounds how long a join token may live.
const MaxTokenTTL = 30 * 24 * time.Hour

func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// Issue creates a join token for name, whose node will have roles (api.DefaultJoinRoles if
// none), valid for ttl (DefaultTokenTTL if zero), pointing at addresses (host:port of this
// cluster's HTTPS API) and pinning the CA fingerprint. Only a hash of the secret is
// stored, with the roles: the joining node cannot choose its own. It refuses a name that
// is already a member or that holds a live token.
func Issue(ctx context.Context, db *store.DB, name string, roles []string, ttl time.Duration, addresses []string, fingerprint string, now time.Time) (Token, error) {
	if err := ValidateName(name); err != nil {
		return Token{}, errorf(ErrInvalid, "%w", err)
	}
	if len(roles) == 0 {
		roles = api.DefaultJoinRoles
	}
	roles, err := NormalizeRoles(roles)
	if err != nil {
		return Token{}, errorf(ErrInvalid, "%w", err)
	}
	if ttl == 0 {
		ttl = DefaultTokenTTL
	}
	if ttl < time.Minute || ttl > MaxTokenTTL {
		return Token{}, errorf(ErrInvalid, "token lifetime %s is out of range, want between 1m and %s", ttl, MaxTokenTTL)
	}
	if len(addresses) == 0 {
		return Token{}, errorf(ErrInvalid, "no cluster address to put in the join token: is the HTTPS API listening?")
	}
	for _, a := range addresses {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return Token{}, errorf(ErrInvalid, "cluster address %q is not host:port", a)
		}
	}
	if err := ValidateFingerprint(fingerprint); err != nil {
		return Token{}, errorf(ErrInvalid, "%w", err)
	}
	if _, err := db.GetMember(ctx, name); err == nil {
		return Token{}, alreadyMember(name)
	} else if !errors.Is(err, store.ErrNotFound) {
		return Token{}, err
	}
	if old, err := db.GetToken(ctx, name); err == nil && old.Live(now) {
		return Token{}, tokenExists(name)
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		return Token{}, err
	}
	secret, err := newSecret()
	if err != nil {
		return Token{}, err
	}
	tok := Token{
		Name:        name,
		Secret:      secret,
		Fingerprint: fingerprint,
		Addresses:   append([]string(nil), addresses...),
		Expires:     now.Add(ttl).UTC().Truncate(time.Second),
	}
	rec := store.TokenRecord{Name: name, SecretHash: hashSecret(secret), Roles: roles, CreatedAt: now, ExpiresAt: tok.Expires}
	if err := db.InsertToken(ctx, rec); errors.Is(err, store.ErrExists) {
		// Lost a race with another Issue or a join: say which.
		if _, merr := db.GetMember(ctx, name); merr == nil {
			return Token{}, alreadyMember(name)
		}
		return Token{}, tokenExists(name)
	} else if err != nil {
		return Token{}, err
	}
	return tok, nil
}

func alreadyMember(name string) error {
	return errorf(ErrAlreadyMember, "%s is already a member of the cluster: remove it first (osd cluster remove %s)", name, name)
}

func tokenExists(name string) error {
	return errorf(ErrTokenExists, "a join token for %s already exists: revoke it first (osd cluster revoke %s)", name, name)
}

// ListTokens returns every stored token with its state at now.
func ListTokens(ctx context.Context, db *store.DB, now time.Time) ([]api.TokenInfo, error) {
	recs, err := db.ListTokens(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.TokenInfo, 0, len(recs))
	for _, r := range recs {
		out = append(out, api.TokenInfo{Name: r.Name, Roles: tokenRoles(r), State: tokenState(r, now), CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt})
	}
	return out, nil
}

// tokenRoles are the roles a token gives its node (tokens issued before roles were
// recorded give the default roles).
func tokenRoles(r store.TokenRecord) []string {
	if len(r.Roles) == 0 {
		return append([]string(nil), api.DefaultJoinRoles...)
	}
	return r.Roles
}

// tokenState names a token's state at now; revocation and use win over expiry.
func tokenState(r store.TokenRecord, now time.Time) string {
	switch {
	case !r.RevokedAt.IsZero():
		return api.TokenRevoked
	case !r.ConsumedAt.IsZero():
		return api.TokenConsumed
	case !now.Before(r.ExpiresAt):
		return api.TokenExpired
	default:
		return api.TokenPending
	}
}

// Revoke makes the unused token of name unusable from now on.
func Revoke(ctx context.Context, db *store.DB, name string, now time.Time) error {
	err := db.RevokeToken(ctx, name, now)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(ErrTokenUnknown, "there is no unused join token for %s to revoke (osd cluster tokens lists them)", name)
	}
	return err
}

// PurgeExpired deletes every token that expired at or before now, whatever its state,
// and returns how many.
func PurgeExpired(ctx context.Context, db *store.DB, now time.Time) (int, error) {
	n, err := db.PurgeTokens(ctx, now)
	return int(n), err
}

// Verify checks that secret proves the token issued for name and that the token is
// still usable at now, and returns the roles it gives. It does not consume the token (see
// Consume). The secret is compared by hash in constant time. A caller that does not hold
// a valid secret learns nothing: an unknown name, a wrong secret and a purged token get
// the same answer (ErrTokenInvalid), so names cannot be probed. A caller that proves the
// secret is told exactly what is wrong (ErrTokenWrongName, ErrTokenExpired,
// ErrTokenRevoked, ErrTokenConsumed) and what to do.
func Verify(ctx context.Context, db *store.DB, name, secret string, now time.Time) ([]string, error) {
	h := hashSecret(secret)
	all, err := db.ListTokens(ctx)
	if err != nil {
		return nil, err
	}
	// Every record is compared, whatever matches, so the time taken does not say
	// whether name has a token.
	var match *store.TokenRecord
	var other string
	for i := range all {
		if !hashEqual(all[i].SecretHash, h) {
			continue
		}
		if all[i].Name == name {
			match = &all[i]
		} else {
			other = all[i].Name
		}
	}
	switch {
	case match != nil:
		return tokenRoles(*match), tokenUsable(*match, now)
	case other != "":
		return nil, errorf(ErrTokenWrongName, "this join token was issued for %s, not %s: join as %s or issue a token for %s (osd cluster add %s)",
			other, name, other, name, name)
	}
	return nil, errorf(ErrTokenInvalid, "the join token for %s is not valid: it was mistyped, replaced by a newer one, or expired and was purged; issue a new one on a member (osd cluster add %s)", name, name)
}

func tokenUsable(rec store.TokenRecord, now time.Time) error {
	switch tokenState(rec, now) {
	case api.TokenRevoked:
		return errorf(ErrTokenRevoked, "the join token for %s was revoked at %s: issue a new one (osd cluster add %s)",
			rec.Name, rec.RevokedAt.Format(time.RFC3339), rec.Name)
	case api.TokenConsumed:
		return errorf(ErrTokenConsumed, "the join token for %s was already used by a completed join at %s: tokens are single use (osd cluster add %s for a new one)",
			rec.Name, rec.ConsumedAt.Format(time.RFC3339), rec.Name)
	case api.TokenExpired:
		return errorf(ErrTokenExpired, "the join token for %s expired at %s: issue a new one (osd cluster add %s)",
			rec.Name, rec.ExpiresAt.Format(time.RFC3339), rec.Name)
	}
	return nil
}

func hashEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// Consume marks the token of name used. Call it only once a join has completed, so a
// join that failed part way can retry with the same token.
func Consume(ctx context.Context, db *store.DB, name string, now time.Time) error {
	err := db.ConsumeToken(ctx, name, now)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("consume join token for %s: %w", name, ErrTokenUnknown)
	}
	return err
}
