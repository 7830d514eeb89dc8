package cluster

import (
	"context"
	"crypto/x509"
	"errors"
	"net/http"
	"time"

	"github.com/osdcloud/osd/daemon/rest"
	"github.com/osdcloud/osd/daemon/store"
)

// maxJoinBody bounds join request bodies (they reach the server unauthenticated).
const maxJoinBody = 16 << 10

// TokenRequest is the body of POST /1.0/cluster/tokens.
type TokenRequest struct {
	Name string `json:"name"`
	TTL  string `json:"ttl,omitempty"` // Go duration, e.g. "1h"; empty: DefaultTokenTTL
}

// IssuedToken is the answer to POST /1.0/cluster/tokens: the encoded token is shown once.
type IssuedToken struct {
	Name    string    `json:"name"`
	Token   string    `json:"token"`
	Expires time.Time `json:"expires"`
}

// TrustRequest is the body of POST /1.0/trust.
type TrustRequest struct {
	Name        string `json:"name"`
	Certificate string `json:"certificate"` // PEM
}

// TrustEntry is a trusted certificate as the API lists it.
type TrustEntry struct {
	Fingerprint string    `json:"fingerprint"`
	Name        string    `json:"name"`
	Kind        string    `json:"kind"`
	AddedAt     time.Time `json:"added_at"`
}

// Endpoints returns the cluster's API endpoints. Only the two join endpoints allow
// untrusted callers; they prove themselves with the token.
//
//	POST   /1.0/cluster/join                 JoinRequest -> JoinResponse
//	POST   /1.0/cluster/join/complete        JoinRequest (+ member client cert) -> Member
//	GET    /1.0/cluster/members              -> []Member
//	GET    /1.0/cluster/members/{name}       -> Member
//	DELETE /1.0/cluster/members/{name}[?force=true]  drain, delete the node, revoke, forget
//	POST   /1.0/cluster/members/{name}/heartbeat  HeartbeatRequest (by that member's certificate only)
//	GET    /1.0/cluster/tokens               -> []TokenInfo
//	POST   /1.0/cluster/tokens               TokenRequest -> IssuedToken (201)
//	DELETE /1.0/cluster/tokens/{name}        revoke
//	GET    /1.0/trust                        -> []TrustEntry
//	POST   /1.0/trust                        TrustRequest -> TrustEntry (201)
//	DELETE /1.0/trust/{fingerprint}          stop trusting
func (s *Service) Endpoints() []rest.Endpoint {
	return []rest.Endpoint{
		{Path: "cluster/join", Post: rest.Action{Handler: s.postJoin, AllowUntrusted: true}},
		{Path: "cluster/join/complete", Post: rest.Action{Handler: s.postJoinComplete, AllowUntrusted: true}},
		{Path: "cluster/members", Get: rest.Action{Handler: s.getMembers}},
		{Path: "cluster/members/{name}", Get: rest.Action{Handler: s.getMember}, Delete: rest.Action{Handler: s.deleteMember}},
		{Path: "cluster/members/{name}/heartbeat", Post: rest.Action{Handler: s.postHeartbeat}},
		{Path: "cluster/tokens", Get: rest.Action{Handler: s.getTokens}, Post: rest.Action{Handler: s.postToken}},
		{Path: "cluster/tokens/{name}", Delete: rest.Action{Handler: s.deleteToken}},
		{Path: "trust", Get: rest.Action{Handler: s.getTrust}, Post: rest.Action{Handler: s.postTrust}},
		{Path: "trust/{fingerprint}", Delete: rest.Action{Handler: s.deleteTrust}},
	}
}

func (s *Service) postJoin(r *http.Request) rest.Response {
	var req JoinRequest
	if err := rest.DecodeJSON(r, &req, maxJoinBody); err != nil {
		return rest.ErrorResponse(err)
	}
	resp, err := HandleJoin(r.Context(), s, req)
	if err != nil {
		return rest.ErrorResponse(err)
	}
	return rest.SyncResponse(resp)
}

func (s *Service) postJoinComplete(r *http.Request) rest.Response {
	var req JoinRequest
	if err := rest.DecodeJSON(r, &req, maxJoinBody); err != nil {
		return rest.ErrorResponse(err)
	}
	m, err := s.HandleJoinComplete(r.Context(), req, peerCert(r))
	if err != nil {
		return rest.ErrorResponse(err)
	}
	return rest.SyncResponse(m)
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
		out = []Member{}
	}
	return rest.SyncResponse(out)
}

func (s *Service) getMember(r *http.Request) rest.Response {
	name := rest.Var(r, "name")
	m, err := s.DB.GetMember(r.Context(), name)
	if errors.Is(err, store.ErrNotFound) {
		return rest.ErrorResponse(errorf(ErrNotMember, "%s is not a member of the cluster (osd cluster list)", name))
	}
	if err != nil {
		return rest.ErrorResponse(err)
	}
	out := memberFromRecord(m)
	out.Version = s.versions.get(name)
	if s.NodeStates != nil {
		states, err := s.NodeStates(r.Context())
		out.NodeState = NodeStateOf(states, err, name)
	}
	return rest.SyncResponse(out)
}

func (s *Service) postHeartbeat(r *http.Request) rest.Response {
	name := rest.Var(r, "name")
	m, err := s.DB.GetMember(r.Context(), name)
	if errors.Is(err, store.ErrNotFound) {
		return rest.ErrorResponse(errorf(ErrNotMember, "%s is not a member of the cluster (osd cluster list)", name))
	}
	if err != nil {
		return rest.ErrorResponse(err)
	}
	if peer := peerCert(r); peer == nil || Fingerprint(peer) != m.Fingerprint {
		return rest.ErrorResponse(rest.Errorf(rest.ErrForbidden, "only member %s itself may send its heartbeat", name))
	}
	var hb HeartbeatRequest
	if r.ContentLength != 0 {
		if err := rest.DecodeJSON(r, &hb, 4096); err != nil {
			return rest.ErrorResponse(err)
		}
	}
	if err := s.DB.MemberHeartbeat(r.Context(), name, s.now()); err != nil {
		return rest.ErrorResponse(err)
	}
	if hb.Version != "" {
		s.versions.set(name, hb.Version)
	}
	return rest.EmptySyncResponse
}

func (s *Service) getTokens(r *http.Request) rest.Response {
	toks, err := ListTokens(r.Context(), s.DB, s.now())
	if err != nil {
		return rest.ErrorResponse(err)
	}
	return rest.SyncResponse(toks)
}

func (s *Service) postToken(r *http.Request) rest.Response {
	var req TokenRequest
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
	var addrs []string
	if s.Addresses != nil {
		addrs = s.Addresses()
	}
	now := s.now()
	if _, err := PurgeExpired(r.Context(), s.DB, now); err != nil {
		return rest.ErrorResponse(err)
	}
	tok, err := Issue(r.Context(), s.DB, req.Name, ttl, addrs, s.CA.Fingerprint(), now)
	if err != nil {
		return rest.ErrorResponse(err)
	}
	return rest.SyncResponseLocation(rest.APIPrefix+"/cluster/tokens/"+tok.Name,
		IssuedToken{Name: tok.Name, Token: tok.Encode(), Expires: tok.Expires})
}

func (s *Service) deleteToken(r *http.Request) rest.Response {
	if err := Revoke(r.Context(), s.DB, rest.Var(r, "name"), s.now()); err != nil {
		return rest.ErrorResponse(err)
	}
	return rest.EmptySyncResponse
}

func (s *Service) getTrust(r *http.Request) rest.Response {
	recs, err := s.DB.ListTrust(r.Context())
	if err != nil {
		return rest.ErrorResponse(err)
	}
	out := make([]TrustEntry, 0, len(recs))
	for _, t := range recs {
		out = append(out, TrustEntry{Fingerprint: t.Fingerprint, Name: t.Name, Kind: t.Kind, AddedAt: t.AddedAt})
	}
	return rest.SyncResponse(out)
}

func (s *Service) postTrust(r *http.Request) rest.Response {
	var req TrustRequest
	if err := rest.DecodeJSON(r, &req, 0); err != nil {
		return rest.ErrorResponse(err)
	}
	now := s.now()
	fp, err := AddTrust(r.Context(), s.DB, req.Name, []byte(req.Certificate), TrustKindClient, now)
	if err != nil {
		return rest.ErrorResponse(err)
	}
	if err := s.reloadTrust(r.Context()); err != nil {
		return rest.ErrorResponse(err)
	}
	return rest.SyncResponseLocation(rest.APIPrefix+"/trust/"+fp,
		TrustEntry{Fingerprint: fp, Name: req.Name, Kind: TrustKindClient, AddedAt: now})
}

func (s *Service) deleteTrust(r *http.Request) rest.Response {
	fp := rest.Var(r, "fingerprint")
	t, err := s.DB.GetTrust(r.Context(), fp)
	if errors.Is(err, store.ErrNotFound) {
		return rest.ErrorResponse(rest.Errorf(rest.ErrNotFound, "certificate %s is not trusted (osd trust list)", fp))
	}
	if err != nil {
		return rest.ErrorResponse(err)
	}
	if t.Kind == TrustKindMember {
		return rest.ErrorResponse(rest.Errorf(rest.ErrConflict, "certificate %s belongs to member %s: remove the member instead (osd cluster remove %s)", fp, t.Name, t.Name))
	}
	if err := s.DB.RemoveTrust(r.Context(), fp); err != nil {
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
	if err := s.DB.RemoveMember(ctx, name); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return errorf(ErrNotMember, "%s is not a member of the cluster (osd cluster list)", name)
		}
		return err
	}
	return s.reloadTrust(ctx)
}
