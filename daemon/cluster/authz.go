package cluster

import (
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/osdcloud/osd/daemon/rest"
)

// Role is who a caller of the HTTPS API is, as its client certificate says.
type Role string

// The roles of HTTPS callers. The unix socket has no roles: only root reaches it, and root
// may do everything.
const (
	// RoleAnyone is a caller without a trusted certificate: only the join routes let it
	// in, and they check the join token themselves.
	RoleAnyone Role = "anyone"
	// RoleOperator is a client certificate trusted with `osd trust add`: it may do
	// everything the unix socket may.
	RoleOperator Role = "operator"
	// RoleMember is a member's certificate: it may keep its own membership (heartbeat,
	// certificate renewal) and read what a member needs, nothing else.
	RoleMember Role = "member"
	// RoleRemoved is the certificate of a member that was removed: it may only hear so
	// from the heartbeat route.
	RoleRemoved Role = "removed"
)

// Roles lists every role, for tests that go through the table role by role.
var Roles = []Role{RoleAnyone, RoleOperator, RoleMember, RoleRemoved}

// Caller is the identity behind one HTTPS request.
type Caller struct {
	Role        Role
	Name        string // the member's or the trusted client's name
	Fingerprint string
}

// Identify tells who presented cert (nil: none) at now, from the trust set: an expired or
// not yet valid certificate, or one nobody trusts, is RoleAnyone.
func (s *TrustSet) Identify(cert *x509.Certificate, now time.Time) Caller {
	if cert == nil {
		return Caller{Role: RoleAnyone}
	}
	fp := Fingerprint(cert)
	c := Caller{Role: RoleAnyone, Fingerprint: fp}
	if now.Before(cert.NotBefore) || now.After(cert.NotAfter) {
		return c
	}
	e, ok := s.lookup(fp)
	if !ok {
		return c
	}
	c.Name = e.name
	switch e.kind {
	case TrustKindClient:
		c.Role = RoleOperator
	case TrustKindMember:
		c.Role = RoleMember
	case trustKindRemoved:
		c.Role = RoleRemoved
	}
	return c
}

// AccessTable says, for every route of the HTTPS API, which roles may call it. A route
// missing from the table is refused to everyone but the unix socket's root.
type AccessTable map[rest.Route][]Role

// Allows reports whether role may call route (RoleAnyone in its entry: every role may).
func (t AccessTable) Allows(route rest.Route, role Role) bool {
	return slices.Contains(t[route], role) || slices.Contains(t[route], RoleAnyone)
}

// Missing lists the routes that have no entry in t (pure).
func (t AccessTable) Missing(routes []rest.Route) []rest.Route {
	var out []rest.Route
	for _, r := range routes {
		if _, ok := t[r]; !ok {
			out = append(out, r)
		}
	}
	return out
}

// Authorizer returns the rest authorizer of the HTTPS API: it identifies the caller by its
// client certificate (Identify) and lets it in when table allows its role for the route.
// Refusals say what the caller lacks: 401 without a certificate where one is needed, 403
// with one that is not valid now, not trusted, or whose role may not call the route.
// Callers without a trusted certificate get limits.AnonymousRequestsPerSec requests on the
// open routes per source address (429 beyond).
func Authorizer(trust *TrustSet, table AccessTable, limits GuardLimits) rest.Authorizer {
	limiter := newRateLimiter(limits.AnonymousRequestsPerSec, limits.AnonymousBurst)
	return func(r *http.Request, route rest.Route) error {
		if table.Allows(route, RoleAnyone) {
			if trust.Identify(peerCert(r), time.Now()).Role == RoleAnyone && !limiter.allow(hostOf(r.RemoteAddr)) {
				return rest.Errorf(rest.ErrTooManyRequests, "too many requests from %s: wait a minute, then retry", hostOf(r.RemoteAddr))
			}
			return nil
		}
		if r.TLS == nil {
			return rest.Errorf(rest.ErrUnauthorized, "the remote API requires TLS with a client certificate")
		}
		cert := peerCert(r)
		if cert == nil {
			return rest.Errorf(rest.ErrUnauthorized, "a client certificate is required: trust yours on a member with `osd trust add NAME CERT` and present it")
		}
		now := time.Now()
		c := trust.Identify(cert, now)
		if table.Allows(route, c.Role) {
			return nil
		}
		switch {
		case now.Before(cert.NotBefore) || now.After(cert.NotAfter):
			return rest.Errorf(rest.ErrForbidden, "client certificate %s is not valid now (valid %s to %s)",
				c.Fingerprint, cert.NotBefore.Format(time.RFC3339), cert.NotAfter.Format(time.RFC3339))
		case c.Role == RoleAnyone:
			return rest.Errorf(rest.ErrForbidden, "client certificate %s is not trusted: add it on a member with `osd trust add NAME CERT`", c.Fingerprint)
		case c.Role == RoleRemoved:
			return rest.Errorf(rest.ErrForbidden, "certificate %s belonged to member %s, which was removed from the cluster", c.Fingerprint, c.Name)
		}
		return rest.Errorf(rest.ErrForbidden, "%s", deniedMessage(c, route))
	}
}

func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

func deniedMessage(c Caller, route rest.Route) string {
	if c.Role == RoleMember {
		return fmt.Sprintf("member certificates (this one is %s's) may not call %s: use an operator certificate (osd trust add)", c.Name, route)
	}
	return fmt.Sprintf("a %s certificate may not call %s", c.Role, route)
}
