package cluster

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/osdcloud/osd/daemon/rest"
	"github.com/osdcloud/osd/daemon/store"
)

// JoinRequest is what a joining node sends to POST /1.0/cluster/join (to receive its
// credentials) and again to POST /1.0/cluster/join/complete (to register, once its k3s
// agent has joined), proving the token by name and secret.
type JoinRequest struct {
	Name    string   `json:"name"`
	Secret  string   `json:"secret"`
	Roles   []string `json:"roles"`
	Address string   `json:"address"` // host:port of the joiner's own HTTPS API
}

// JoinResponse carries what the joiner needs: its member certificate and key, the
// cluster CA, and what its embedded k3s agent needs to join.
type JoinResponse struct {
	MemberCertPEM string `json:"member_cert_pem"`
	MemberKeyPEM  string `json:"member_key_pem"`
	CACertPEM     string `json:"ca_cert_pem"`
	K3sServerURL  string `json:"k3s_server_url"`
	K3sToken      string `json:"k3s_token"`
}

// Member is a member of the cluster as the API shows it.
type Member struct {
	Name          string     `json:"name"`
	Address       string     `json:"address"`
	Fingerprint   string     `json:"fingerprint"`
	Roles         []string   `json:"roles"`
	JoinedAt      time.Time  `json:"joined_at"`
	LastHeartbeat *time.Time `json:"last_heartbeat,omitempty"`
	// NodeState is the member's Kubernetes node as the cluster sees it: Ready, NotReady,
	// absent or unknown (set by listings).
	NodeState string `json:"node_state,omitempty"`
	// Version is the member's osd version from its last heartbeat ("" until one arrives).
	Version string `json:"version,omitempty"`
	// Local marks the daemon that answered (the node that ran osd init).
	Local bool `json:"local,omitempty"`
}

func memberFromRecord(r store.MemberRecord) Member {
	m := Member{Name: r.Name, Address: r.Address, Fingerprint: r.Fingerprint, Roles: r.Roles, JoinedAt: r.JoinedAt}
	if m.Roles == nil {
		m.Roles = []string{}
	}
	if !r.LastHeartbeat.IsZero() {
		t := r.LastHeartbeat
		m.LastHeartbeat = &t
	}
	return m
}

// JoinDeps is what HandleJoin needs from the daemon.
type JoinDeps interface {
	// VerifyToken checks name and secret against the stored token (see Verify).
	VerifyToken(ctx context.Context, name, secret string) error
	// IsMember reports whether name already is a member.
	IsMember(ctx context.Context, name string) (bool, error)
	// IssueMemberCert issues a member certificate and key for name.
	IssueMemberCert(name string) (certPEM, keyPEM []byte, err error)
	// CACertPEM is the cluster CA certificate.
	CACertPEM() []byte
	// K3sJoinInfo returns the k3s server URL and the node token an agent joins with.
	K3sJoinInfo(ctx context.Context) (serverURL, token string, err error)
}

// ValidateJoinRequest checks the shape of req and returns its normalized roles; errors
// wrap ErrInvalid (400).
func ValidateJoinRequest(req JoinRequest) ([]string, error) {
	if err := ValidateName(req.Name); err != nil {
		return nil, errorf(ErrInvalid, "%w", err)
	}
	if req.Secret == "" {
		return nil, errorf(ErrInvalid, "join request has no secret: send the secret from the join token")
	}
	roles, err := NormalizeRoles(req.Roles)
	if err != nil {
		return nil, errorf(ErrInvalid, "%w", err)
	}
	if _, port, err := net.SplitHostPort(req.Address); err != nil || port == "" {
		return nil, errorf(ErrInvalid, "join request address %q is not host:port of the joining node's API", req.Address)
	}
	return roles, nil
}

// HandleJoin answers a join request: the request is well formed, the token proves the
// name, the name is not already a member; then the joiner gets a fresh member certificate,
// the CA and the k3s join information. Nothing is stored, so a join that fails later can
// retry with the same token; registration happens in HandleJoinComplete. Errors wrap
// rest sentinels: 400 malformed, 401 unknown token or bad secret, 403 expired, revoked,
// used or wrong name, 409 already a member, 503 Kubernetes not ready.
func HandleJoin(ctx context.Context, deps JoinDeps, req JoinRequest) (JoinResponse, error) {
	if _, err := ValidateJoinRequest(req); err != nil {
		return JoinResponse{}, err
	}
	if err := deps.VerifyToken(ctx, req.Name, req.Secret); err != nil {
		return JoinResponse{}, err
	}
	member, err := deps.IsMember(ctx, req.Name)
	if err != nil {
		return JoinResponse{}, err
	}
	if member {
		return JoinResponse{}, alreadyMember(req.Name)
	}
	url, k3sToken, err := deps.K3sJoinInfo(ctx)
	if err != nil {
		return JoinResponse{}, rest.Errorf(rest.ErrNotReady, "kubernetes cannot take a new node yet: %w", err)
	}
	certPEM, keyPEM, err := deps.IssueMemberCert(req.Name)
	if err != nil {
		return JoinResponse{}, err
	}
	return JoinResponse{
		MemberCertPEM: string(certPEM),
		MemberKeyPEM:  string(keyPEM),
		CACertPEM:     string(deps.CACertPEM()),
		K3sServerURL:  url,
		K3sToken:      k3sToken,
	}, nil
}

// K3sJoinInfoFunc supplies the k3s server URL and node token (the daemon's embedded k3s).
type K3sJoinInfoFunc func(ctx context.Context) (serverURL, token string, err error)

// Service is the cluster's server side backed by the state database and the CA: it
// implements JoinDeps and the API endpoints.
type Service struct {
	DB        *store.DB
	CA        *CA
	K3s       K3sJoinInfoFunc
	Trust     *TrustSet        // reloaded after every trust change
	Addresses func() []string  // this daemon's HTTPS addresses, for tokens
	Now       func() time.Time // nil: time.Now
	// NodeStates, when set, gives listings each member's Kubernetes node state.
	NodeStates NodeStatesFunc
	// Local, when set, describes this daemon as the first entry of listings (nil: none).
	Local func() *Member
	// RemoveNode, when set, takes a member's node out of Kubernetes before removal.
	RemoveNode RemoveNodeFunc

	versions versions
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// VerifyToken implements JoinDeps.
func (s *Service) VerifyToken(ctx context.Context, name, secret string) error {
	return Verify(ctx, s.DB, name, secret, s.now())
}

// IsMember implements JoinDeps.
func (s *Service) IsMember(ctx context.Context, name string) (bool, error) {
	_, err := s.DB.GetMember(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// IssueMemberCert implements JoinDeps.
func (s *Service) IssueMemberCert(name string) (certPEM, keyPEM []byte, err error) {
	return IssueMemberCert(s.CA, name)
}

// CACertPEM implements JoinDeps.
func (s *Service) CACertPEM() []byte { return s.CA.CertPEM }

// K3sJoinInfo implements JoinDeps.
func (s *Service) K3sJoinInfo(ctx context.Context) (string, string, error) {
	if s.K3s == nil {
		return "", "", errors.New("no kubernetes server in this daemon")
	}
	return s.K3s(ctx)
}

// HandleJoinComplete registers the joiner once its k3s agent has joined. The request
// repeats the join request and arrives over TLS presenting the member certificate from
// HandleJoin (peer), which must be signed by the cluster CA for client use and name
// req.Name. In one transaction the token is consumed, the member recorded and its
// certificate trusted. Repeating a completion that already succeeded with the same
// certificate returns the member again, so a joiner that lost the answer can retry.
func (s *Service) HandleJoinComplete(ctx context.Context, req JoinRequest, peer *x509.Certificate) (Member, error) {
	roles, err := ValidateJoinRequest(req)
	if err != nil {
		return Member{}, err
	}
	if peer == nil {
		return Member{}, rest.Errorf(rest.ErrUnauthorized, "completing a join needs the member certificate the join returned, presented as the TLS client certificate")
	}
	if err := s.checkMemberCert(peer, req.Name); err != nil {
		return Member{}, err
	}
	fp := Fingerprint(peer)
	if err := s.VerifyToken(ctx, req.Name, req.Secret); err != nil {
		if errors.Is(err, ErrTokenConsumed) {
			if m, merr := s.DB.GetMember(ctx, req.Name); merr == nil && m.Fingerprint == fp {
				return memberFromRecord(m), nil
			}
		}
		return Member{}, err
	}
	now := s.now()
	rec := store.MemberRecord{Name: req.Name, Address: req.Address, Fingerprint: fp, Roles: roles, JoinedAt: now}
	trust := store.TrustRecord{Fingerprint: fp, Name: req.Name, Kind: TrustKindMember, CertPEM: string(pemCert(peer)), AddedAt: now}
	if err := s.DB.CompleteJoin(ctx, rec, trust, now); err != nil {
		switch {
		case errors.Is(err, store.ErrExists):
			return Member{}, errorf(ErrAlreadyMember, "%s or its certificate is already registered: remove it first (osd cluster remove %s)", req.Name, req.Name)
		case errors.Is(err, store.ErrNotFound):
			return Member{}, errorf(ErrTokenUnknown, "the join token for %s was used or revoked meanwhile", req.Name)
		}
		return Member{}, err
	}
	if err := s.reloadTrust(ctx); err != nil {
		return Member{}, err
	}
	return memberFromRecord(rec), nil
}

// checkMemberCert verifies that cert was issued by the cluster CA to name for client use.
func (s *Service) checkMemberCert(cert *x509.Certificate, name string) error {
	roots := x509.NewCertPool()
	roots.AddCert(s.CA.Cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: s.now(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return rest.Errorf(rest.ErrForbidden, "the client certificate is not a member certificate of this cluster: %v", err)
	}
	if cert.Subject.CommonName != name || !slices.Contains(cert.DNSNames, name) {
		return rest.Errorf(rest.ErrForbidden, "the member certificate was issued to %q, not %q", cert.Subject.CommonName, name)
	}
	return nil
}

func (s *Service) reloadTrust(ctx context.Context) error {
	if s.Trust == nil {
		return nil
	}
	if err := s.Trust.Load(ctx, s.DB); err != nil {
		return fmt.Errorf("reload trusted certificates: %w", err)
	}
	return nil
}
