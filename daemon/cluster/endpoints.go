package cluster

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/rest"
	"github.com/osdcloud/osd/daemon/store"
)

// maxJoinBody bounds join request bodies (they reach the server unauthenticated).
const maxJoinBody = 16 << 10

// Endpoints returns the cluster's API endpoints (who may call each over HTTPS: Access).
//
//	POST   /1.0/cluster/join                 api.JoinRequest -> api.JoinResponse
//	POST   /1.0/cluster/join/complete        api.JoinRequest (+ member client cert) -> api.Member
//	GET    /1.0/cluster/members              -> []api.Member
//	GET    /1.0/cluster/members/{name}       -> api.Member
//	DELETE /1.0/cluster/members/{name}[?force=true]  drain, delete the node, revoke, forget
//	POST   /1.0/cluster/members/{name}/heartbeat    api.HeartbeatRequest (that member only)
//	PUT    /1.0/cluster/members/{name}/maintenance  api.MaintenanceRequest -> api.Member (operators)
//	POST   /1.0/cluster/members/{name}/certificate  api.RenewRequest -> api.RenewResponse (that member only)
//	POST   /1.0/cluster/members/{name}/ovn-chassis  api.ChassisCertRequest -> api.ChassisCertResponse (that member only)
//	GET    /1.0/cluster/tokens               -> []api.TokenInfo
//	POST   /1.0/cluster/tokens               api.TokenRequest -> api.IssuedToken (201)
//	DELETE /1.0/cluster/tokens/{name}        revoke
//	GET    /1.0/trust                        -> []api.TrustEntry
//	POST   /1.0/trust                        api.TrustRequest -> api.TrustEntry (201)
//	DELETE /1.0/trust/{fingerprint}          stop trusting
func (s *Service) Endpoints() []rest.Endpoint {
	return []rest.Endpoint{
		{Path: "cluster/join", Post: rest.Action{Handler: s.postJoin}},
		{Path: "cluster/join/complete", Post: rest.Action{Handler: s.postJoinComplete}},
		{Path: "cluster/members", Get: rest.Action{Handler: s.getMembers}},
		{Path: "cluster/members/{name}", Get: rest.Action{Handler: s.getMember}, Delete: rest.Action{Handler: s.deleteMember}},
		{Path: "cluster/members/{name}/heartbeat", Post: rest.Action{Handler: s.postHeartbeat}},
		{Path: "cluster/members/{name}/maintenance", Put: rest.Action{Handler: s.putMaintenance}},
		{Path: "cluster/members/{name}/certificate", Post: rest.Action{Handler: s.postCertificate}},
		{Path: "cluster/members/{name}/ovn-chassis", Post: rest.Action{Handler: s.postChassisCert}},
		{Path: "cluster/tokens", Get: rest.Action{Handler: s.getTokens}, Post: rest.Action{Handler: s.postToken}},
		{Path: "cluster/tokens/{name}", Delete: rest.Action{Handler: s.deleteToken}},
		{Path: "trust", Get: rest.Action{Handler: s.getTrust}, Post: rest.Action{Handler: s.postTrust}},
		{Path: "trust/{fingerprint}", Delete: rest.Action{Handler: s.deleteTrust}},
	}
}

// Access is who may call each of the cluster's routes over HTTPS. The two join routes
// are open: they check the join token (and the completion the member certificate) in
// their handlers. A member may read the members, keep itself a member and nothing more;
// a removed member's certificate may only hear that it was removed.
var Access = AccessTable{
	{Method: "POST", Path: "cluster/join"}:                       {RoleAnyone},
	{Method: "POST", Path: "cluster/join/complete"}:              {RoleAnyone},
	{Method: "GET", Path: "cluster/members"}:                     {RoleOperator, RoleMember},
	{Method: "GET", Path: "cluster/members/{name}"}:              {RoleOperator, RoleMember},
	{Method: "DELETE", Path: "cluster/members/{name}"}:           {RoleOperator},
	{Method: "POST", Path: "cluster/members/{name}/heartbeat"}:   {RoleMember, RoleRemoved},
	{Method: "PUT", Path: "cluster/members/{name}/maintenance"}:  {RoleOperator},
	{Method: "POST", Path: "cluster/members/{name}/certificate"}: {RoleMember},
	{Method: "POST", Path: "cluster/members/{name}/ovn-chassis"}: {RoleMember},
	{Method: "GET", Path: "cluster/tokens"}:                      {RoleOperator},
	{Method: "POST", Path: "cluster/tokens"}:                     {RoleOperator},
	{Method: "DELETE", Path: "cluster/tokens/{name}"}:            {RoleOperator},
	{Method: "GET", Path: "trust"}:                               {RoleOperator},
	{Method: "POST", Path: "trust"}:                              {RoleOperator},
	{Method: "DELETE", Path: "trust/{fingerprint}"}:              {RoleOperator},
}

func (s *Service) postJoin(r *http.Request) rest.Response {
	var req api.JoinRequest
	if err := rest.DecodeJSON(r, &req, maxJoinBody); err != nil {
		return rest.ErrorResponse(err)
	}
	resp, err := HandleJoin(r.Context(), s, req)
	if err != nil {
		return rest.ErrorResponse(err)
	}
	// The joiner's agent and tunnel reach this host from where it asked from: open the
	// firewall to that address before it has its credential (not to any other address
	// the request names: the token holder would choose what is trusted).
	if err := s.hooks.Peers(r.Context(), joinerAddresses(r.RemoteAddr), nil); err != nil {
		return rest.ErrorResponse(fmt.Errorf("open the host firewall to the joining node: %w", err))
	}
	return rest.SyncResponse(resp)
}

func (s *Service) postJoinComplete(r *http.Request) rest.Response {
	var req api.JoinRequest
	if err := rest.DecodeJSON(r, &req, maxJoinBody); err != nil {
		return rest.ErrorResponse(err)
	}
	m, err := s.HandleJoinComplete(r.Context(), req, peerCert(r))
	if err != nil {
		return rest.ErrorResponse(err)
	}
	return rest.SyncResponse(m)
}

// joinerAddresses is the IP address of a join request's peer (host:port), the one address
// the firewall opens to a joiner before its join completes (pure). The API address the
// request gives is trusted only as the member's address once the join completes; before
// that it is not taken, whatever it says.
func joinerAddresses(remote string) []string {
	h, _, err := net.SplitHostPort(remote)
	if err != nil {
		h = remote
	}
	if ip := net.ParseIP(h); ip != nil {
		return []string{ip.String()}
	}
	return nil
}

func peerCert(r *http.Request) *x509.Certificate {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return nil
	}
	return r.TLS.PeerCertificates[0]
}

func (s *Service) getMembers(r *http.Request) rest.Response {
	out, err := s.ListMembers(r.Context())
	if err != nil {
		return rest.ErrorResponse(err)
	}
	if out == nil {
		out = []api.Member{}
	}
	return rest.SyncResponse(out)
}

func (s *Service) getMember(r *http.Request) rest.Response {
	name := rest.Var(r, "name")
	m, err := s.db.GetMember(r.Context(), name)
	if errors.Is(err, store.ErrNotFound) {
		return rest.ErrorResponse(errorf(ErrNotMember, "%s is not a member of the cluster (osd cluster list)", name))
	}
	if err != nil {
		return rest.ErrorResponse(err)
	}
	out := memberFromRecord(m)
	out.Version, out.HeldImages = s.versions.get(name), s.versions.heldImages(name)
	states, err := s.hooks.NodeStates(r.Context())
	out.NodeState = NodeStateOf(states, err, name)
	ms := []api.Member{out}
	s.hooks.Describe(r.Context(), ms)
	out = ms[0]
	return rest.SyncResponse(out)
}

// putMaintenance puts node name (a member, or this daemon's own node) into maintenance or
// takes it out (Maintenance), and answers its entry as the member list shows it.
func (s *Service) putMaintenance(r *http.Request) rest.Response {
	name := rest.Var(r, "name")
	var req api.MaintenanceRequest
	if err := rest.DecodeJSON(r, &req, 4096); err != nil {
		return rest.ErrorResponse(err)
	}
	ms, err := s.ListMembers(r.Context())
	if err != nil {
		return rest.ErrorResponse(err)
	}
	i := slices.IndexFunc(ms, func(m api.Member) bool { return m.Name == name })
	if i < 0 {
		return rest.ErrorResponse(errorf(ErrNotMember, "%s is neither a member of the cluster nor this node (osd cluster list)", name))
	}
	if err := s.hooks.Maintenance(r.Context(), name, req.Enabled); err != nil {
		return rest.ErrorResponse(err)
	}
	if ms, err = s.ListMembers(r.Context()); err != nil {
		return rest.ErrorResponse(err)
	}
	if i = slices.IndexFunc(ms, func(m api.Member) bool { return m.Name == name }); i < 0 {
		return rest.ErrorResponse(errorf(ErrNotMember, "%s is no longer a member of the cluster", name))
	}
	return rest.SyncResponse(ms[i])
}

// caller identifies who sent r (over the unix socket: nobody, with no certificate).
func (s *Service) caller(r *http.Request) Caller {
	if s.trust == nil {
		return Caller{Role: RoleAnyone}
	}
	return s.trust.Identify(peerCert(r), s.now())
}

// itself checks that r comes from member name's own certificate; a removed member's
// certificate is told it was removed (410), so the node knows to stop.
func (s *Service) itself(r *http.Request, name string) (Caller, error) {
	c := s.caller(r)
	switch {
	case c.Role == RoleRemoved && c.Name == name:
		return c, rest.Errorf(rest.ErrGone, "%s was removed from the cluster: run osd reset on it, then join it again with a new token (osd cluster add %s)", name, name)
	case c.Role != RoleMember || c.Name != name:
		return c, rest.Errorf(rest.ErrForbidden, "only member %s itself may do this, with its member certificate", name)
	}
	return c, nil
}

func (s *Service) postHeartbeat(r *http.Request) rest.Response {
	name := rest.Var(r, "name")
	c, err := s.itself(r, name)
	if err != nil {
		return rest.ErrorResponse(err)
	}
	var hb api.HeartbeatRequest
	if r.ContentLength != 0 {
		if err := rest.DecodeJSON(r, &hb, 4096); err != nil {
			return rest.ErrorResponse(err)
		}
	}
	if err := s.db.MemberHeartbeat(r.Context(), name, s.now()); err != nil {
		return rest.ErrorResponse(err)
	}
	if hb.Version != "" || hb.Images != nil {
		s.versions.set(name, hb.Version, hb.Images)
	}
	if m, err := s.db.GetMember(r.Context(), name); err == nil && m.Fingerprint == c.Fingerprint {
		// The member holds its newest certificate: the ones it renewed away go.
		if n, err := s.db.PruneMemberCerts(r.Context(), name); err != nil {
			return rest.ErrorResponse(err)
		} else if n > 0 {
			if err := s.reloadTrust(r.Context()); err != nil {
				return rest.ErrorResponse(err)
			}
		}
	}
	return rest.EmptySyncResponse
}

// postCertificate renews the calling member's certificate for the key in its request.
func (s *Service) postCertificate(r *http.Request) rest.Response {
	name := rest.Var(r, "name")
	if _, err := s.itself(r, name); err != nil {
		return rest.ErrorResponse(err)
	}
	var req api.RenewRequest
	if err := rest.DecodeJSON(r, &req, maxCSR+1024); err != nil {
		return rest.ErrorResponse(err)
	}
	pub, err := ParseCSR(req.CSR)
	if err != nil {
		return rest.ErrorResponse(err)
	}
	certPEM, err := s.IssueMemberCert(name, pub)
	if err != nil {
		return rest.ErrorResponse(err)
	}
	cert, err := ParseCertPEM(certPEM)
	if err != nil {
		return rest.ErrorResponse(err)
	}
	rec := store.TrustRecord{Fingerprint: Fingerprint(cert), Name: name, Kind: TrustKindMember, CertPEM: string(certPEM), AddedAt: s.now()}
	if err := s.db.RenewMemberCert(r.Context(), rec); err != nil {
		return rest.ErrorResponse(err)
	}
	if err := s.reloadTrust(r.Context()); err != nil {
		return rest.ErrorResponse(err)
	}
	return rest.SyncResponse(api.RenewResponse{CertificatePEM: string(certPEM), Expires: cert.NotAfter})
}

// postChassisCert signs the calling member's OVN chassis certificate (SignChassis decides).
func (s *Service) postChassisCert(r *http.Request) rest.Response {
	name := rest.Var(r, "name")
	if _, err := s.itself(r, name); err != nil {
		return rest.ErrorResponse(err)
	}
	var req api.ChassisCertRequest
	if err := rest.DecodeJSON(r, &req, maxCSR+1024); err != nil {
		return rest.ErrorResponse(err)
	}
	cert, ca, err := s.hooks.SignChassis(r.Context(), name, req.SystemID, req.CSR)
	if err != nil {
		return rest.ErrorResponse(err)
	}
	return rest.SyncResponse(api.ChassisCertResponse{CertificatePEM: string(cert), CAPEM: string(ca)})
}

func (s *Service) getTokens(r *http.Request) rest.Response {
	toks, err := ListTokens(r.Context(), s.db, s.now())
	if err != nil {
		return rest.ErrorResponse(err)
	}
	return rest.SyncResponse(toks)
}

func (s *Service) postToken(r *http.Request) rest.Response {
	var req api.TokenRequest
	if err := rest.DecodeJSON(r, &req, 0); err != nil {
		return rest.ErrorResponse(err)
	}
	var ttl time.Duration
	if req.TTL != "" {
		var err error
		if ttl, err = time.ParseDuration(req.TTL); err != nil {
			return rest.ErrorResponse(errorf(ErrInvalid, "ttl %q is not a duration such as 1h or 30m", req.TTL))
		}
	}
	addrs := s.addresses()
	now := s.now()
	if _, err := PurgeExpired(r.Context(), s.db, now); err != nil {
		return rest.ErrorResponse(err)
	}
	roles := req.Roles
	if len(roles) == 0 {
		roles = api.DefaultJoinRoles
	}
	roles, err := NormalizeRoles(roles)
	if err != nil {
		return rest.ErrorResponse(errorf(ErrInvalid, "%w", err))
	}
	tok, err := Issue(r.Context(), s.db, req.Name, roles, ttl, addrs, s.ca.Fingerprint(), now)
	if err != nil {
		return rest.ErrorResponse(err)
	}
	if err := s.hooks.TokenIssued(r.Context(), tok.Name); err != nil {
		_ = Revoke(r.Context(), s.db, tok.Name, now)
		return rest.ErrorResponse(rest.Errorf(rest.ErrNotReady, "no token issued: a node called %s could not be let in to Kubernetes (try again): %w", tok.Name, err))
	}
	return rest.SyncResponseLocation(rest.APIPrefix+"/cluster/tokens/"+tok.Name,
		api.IssuedToken{Name: tok.Name, Roles: roles, Token: tok.Encode(), Expires: tok.Expires})
}

func (s *Service) deleteToken(r *http.Request) rest.Response {
	name := rest.Var(r, "name")
	if err := ValidateName(name); err != nil {
		return rest.ErrorResponse(errorf(ErrInvalid, "%w", err))
	}
	// First the k3s credential the token's join may have received: a revoked token must
	// not leave a node able to register.
	if err := s.hooks.TokenDropped(r.Context(), name); err != nil {
		return rest.ErrorResponse(rest.Errorf(rest.ErrNotReady, "not revoked: the agent credentials of %s could not be dropped (try again): %w", name, err))
	}
	if err := Revoke(r.Context(), s.db, name, s.now()); err != nil {
		return rest.ErrorResponse(err)
	}
	return rest.EmptySyncResponse
}

func (s *Service) getTrust(r *http.Request) rest.Response {
	recs, err := s.db.ListTrust(r.Context())
	if err != nil {
		return rest.ErrorResponse(err)
	}
	out := make([]api.TrustEntry, 0, len(recs))
	for _, t := range recs {
		out = append(out, api.TrustEntry{Fingerprint: t.Fingerprint, Name: t.Name, Kind: t.Kind, AddedAt: t.AddedAt})
	}
	return rest.SyncResponse(out)
}

func (s *Service) postTrust(r *http.Request) rest.Response {
	var req api.TrustRequest
	if err := rest.DecodeJSON(r, &req, 0); err != nil {
		return rest.ErrorResponse(err)
	}
	now := s.now()
	fp, err := AddTrust(r.Context(), s.db, req.Name, []byte(req.Certificate), TrustKindClient, now)
	if err != nil {
		return rest.ErrorResponse(err)
	}
	if err := s.reloadTrust(r.Context()); err != nil {
		return rest.ErrorResponse(err)
	}
	return rest.SyncResponseLocation(rest.APIPrefix+"/trust/"+fp,
		api.TrustEntry{Fingerprint: fp, Name: req.Name, Kind: TrustKindClient, AddedAt: now})
}

func (s *Service) deleteTrust(r *http.Request) rest.Response {
	fp := rest.Var(r, "fingerprint")
	t, err := s.db.GetTrust(r.Context(), fp)
	if errors.Is(err, store.ErrNotFound) {
		return rest.ErrorResponse(rest.Errorf(rest.ErrNotFound, "certificate %s is not trusted (osd trust list)", fp))
	}
	if err != nil {
		return rest.ErrorResponse(err)
	}
	if t.Kind == TrustKindMember {
		return rest.ErrorResponse(rest.Errorf(rest.ErrConflict, "certificate %s belongs to member %s: remove the member instead (osd cluster remove %s)", fp, t.Name, t.Name))
	}
	if err := s.db.RemoveTrust(r.Context(), fp); err != nil {
		return rest.ErrorResponse(err)
	}
	if err := s.reloadTrust(r.Context()); err != nil {
		return rest.ErrorResponse(err)
	}
	return rest.EmptySyncResponse
}

// RemoveMember forgets member name and stops trusting its certificate. The daemon calls
// it after draining and deleting the member's k3s node.
func (s *Service) RemoveMember(ctx context.Context, name string) error {
	if err := s.db.RemoveMember(ctx, name, s.now()); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return errorf(ErrNotMember, "%s is not a member of the cluster (osd cluster list)", name)
		}
		return err
	}
	return s.reloadTrust(ctx)
}
