package cluster

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/rest"
	"github.com/osdcloud/osd/daemon/store"
)

// maxCSR bounds the PEM certificate request a joining or renewing member sends.
const maxCSR = 8 << 10

func memberFromRecord(r store.MemberRecord) api.Member {
	m := api.Member{Name: r.Name, Address: r.Address, Fingerprint: r.Fingerprint, Hostname: r.Hostname, Roles: r.Roles, JoinedAt: r.JoinedAt}
	if m.Roles == nil {
		m.Roles = []string{}
	}
	if !r.LastHeartbeat.IsZero() {
		t := r.LastHeartbeat
		m.LastHeartbeat = &t
	}
	return m
}

// AgentCredential lets one node's k3s agent register with the cluster's Kubernetes for a
// short time: a k3s bootstrap token, never the cluster's server or agent token.
type AgentCredential struct {
	ServerURL string
	Token     string
	Expires   time.Time
}

// JoinDeps is what HandleJoin needs from the daemon.
type JoinDeps interface {
	// VerifyToken checks name and secret against the stored token and returns the roles
	// it gives (see Verify).
	VerifyToken(ctx context.Context, name, secret string) ([]string, error)
	// IsMember reports whether name already is a member.
	IsMember(ctx context.Context, name string) (bool, error)
	// IssueMemberCert issues member name's client certificate for pub.
	IssueMemberCert(name string, pub crypto.PublicKey) (certPEM []byte, err error)
	// CACertPEM is the cluster CA certificate.
	CACertPEM() []byte
	// AgentCredential issues the credential node name's k3s agent registers with.
	AgentCredential(ctx context.Context, name string) (AgentCredential, error)
	// Hostnames lists the node answering the join (Local) and every member, each with
	// its OS hostname ("" when unknown).
	Hostnames(ctx context.Context) ([]api.Member, error)
	// Release is the OpenStack release the cluster's cloud runs, by codename: the joiner
	// builds or fetches that release's images.
	Release(ctx context.Context) (string, error)
}

// ValidateJoinRequest checks the shape of req (pure); errors wrap ErrInvalid (400).
// withCSR says whether a certificate request must come with it (the first step).
func ValidateJoinRequest(req api.JoinRequest, withCSR bool) error {
	if err := ValidateName(req.Name); err != nil {
		return errorf(ErrInvalid, "%w", err)
	}
	if req.Secret == "" {
		return errorf(ErrInvalid, "join request has no secret: send the secret from the join token")
	}
	if _, port, err := net.SplitHostPort(req.Address); err != nil || port == "" {
		return errorf(ErrInvalid, "join request address %q is not host:port of the joining node's API", req.Address)
	}
	if withCSR && req.CSR == "" {
		return errorf(ErrInvalid, "join request has no certificate request: send a PEM CSR for the member's key")
	}
	if req.Hostname != "" {
		return ValidateHostname(req.Hostname)
	}
	return nil
}

// ParseCSR decodes and checks a PEM certificate request (pure): one CERTIFICATE REQUEST
// block of at most maxCSR bytes whose signature proves its key. It returns the key.
func ParseCSR(csrPEM string) (crypto.PublicKey, error) {
	if len(csrPEM) > maxCSR {
		return nil, errorf(ErrInvalid, "certificate request is %d bytes, want at most %d", len(csrPEM), maxCSR)
	}
	b, _ := pem.Decode([]byte(csrPEM))
	if b == nil || b.Type != "CERTIFICATE REQUEST" {
		return nil, errorf(ErrInvalid, "certificate request is not a PEM CERTIFICATE REQUEST block")
	}
	csr, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return nil, errorf(ErrInvalid, "certificate request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, errorf(ErrInvalid, "certificate request signature: %w", err)
	}
	return csr.PublicKey, nil
}

// HandleJoin answers a join request: the request is well formed, the token proves the
// name, the name is not already a member, no other node has the joiner's hostname; then
// the joiner gets its member certificate, the CA, its roles and the credential for its
// k3s agent. Nothing is stored, so a join that fails later can retry with the same
// token (each retry replaces the node's agent credential); registration happens in
// HandleJoinComplete. Errors wrap rest sentinels:
// 400 malformed, 401 a token the caller cannot prove, 403 expired, revoked, used or
// another name's, 409 already a member or hostname taken, 503 Kubernetes not ready.
func HandleJoin(ctx context.Context, deps JoinDeps, req api.JoinRequest) (api.JoinResponse, error) {
	if err := ValidateJoinRequest(req, true); err != nil {
		return api.JoinResponse{}, err
	}
	pub, err := ParseCSR(req.CSR)
	if err != nil {
		return api.JoinResponse{}, err
	}
	roles, err := deps.VerifyToken(ctx, req.Name, req.Secret)
	if err != nil {
		return api.JoinResponse{}, err
	}
	member, err := deps.IsMember(ctx, req.Name)
	if err != nil {
		return api.JoinResponse{}, err
	}
	if member {
		return api.JoinResponse{}, alreadyMember(req.Name)
	}
	if err := checkHostname(ctx, deps, req, false); err != nil {
		return api.JoinResponse{}, err
	}
	agent, err := deps.AgentCredential(ctx, req.Name)
	if err != nil {
		return api.JoinResponse{}, rest.Errorf(rest.ErrNotReady, "kubernetes cannot take a new node yet: %w", err)
	}
	release, err := deps.Release(ctx)
	if err != nil {
		return api.JoinResponse{}, err
	}
	certPEM, err := deps.IssueMemberCert(req.Name, pub)
	if err != nil {
		return api.JoinResponse{}, err
	}
	return api.JoinResponse{
		Release:         release,
		MemberCertPEM:   string(certPEM),
		CACertPEM:       string(deps.CACertPEM()),
		Roles:           roles,
		K3sServerURL:    agent.ServerURL,
		K3sToken:        agent.Token,
		K3sTokenExpires: agent.Expires,
	}, nil
}

// checkHostname refuses req when another node has its hostname (hostnameConflict). It
// runs only once the token is proven, so that nobody without one learns members' names.
func checkHostname(ctx context.Context, deps JoinDeps, req api.JoinRequest, completing bool) error {
	if req.Hostname == "" {
		return nil
	}
	nodes, err := deps.Hostnames(ctx)
	if err != nil {
		return err
	}
	return hostnameConflict(req.Name, req.Hostname, nodes, completing)
}

// Config is what the cluster's server side is made of.
type Config struct {
	DB *store.DB
	CA *CA
	// Trust is reloaded after every trust change (nil: callers are not identified).
	Trust *TrustSet
	// Addresses are this daemon's HTTPS addresses, for tokens (nil: none).
	Addresses func() []string
	// MemberCertLifetime is how long member certificates last (0: MemberCertLifetime).
	// Members renew theirs over the API when half of it has passed.
	MemberCertLifetime time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Service is the cluster's server side backed by the state database and the CA: it
// implements JoinDeps and the API endpoints, and asks the rest of the daemon what only it
// knows through its Hooks.
type Service struct {
	db           *store.DB
	ca           *CA
	trust        *TrustSet
	addresses    func() []string
	certLifetime time.Duration
	now          func() time.Time
	hooks        Hooks

	versions versions
}

// New returns the cluster's server side of cfg, asking hooks what Kubernetes, the cloud
// and the host know.
func New(cfg Config, hooks Hooks) *Service {
	s := &Service{db: cfg.DB, ca: cfg.CA, trust: cfg.Trust, addresses: cfg.Addresses, certLifetime: cfg.MemberCertLifetime,
		now: cfg.Now, hooks: hooks}
	if s.addresses == nil {
		s.addresses = func() []string { return nil }
	}
	if s.certLifetime <= 0 {
		s.certLifetime = MemberCertLifetime
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// VerifyToken implements JoinDeps.
func (s *Service) VerifyToken(ctx context.Context, name, secret string) ([]string, error) {
	return Verify(ctx, s.db, name, secret, s.now())
}

// IsMember implements JoinDeps.
func (s *Service) IsMember(ctx context.Context, name string) (bool, error) {
	_, err := s.db.GetMember(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// IssueMemberCert implements JoinDeps.
func (s *Service) IssueMemberCert(name string, pub crypto.PublicKey) ([]byte, error) {
	return IssueMemberCert(s.ca, name, pub, s.now(), s.certLifetime)
}

// CACertPEM implements JoinDeps.
func (s *Service) CACertPEM() []byte { return s.ca.CertPEM }

// AgentCredential implements JoinDeps.
func (s *Service) AgentCredential(ctx context.Context, name string) (AgentCredential, error) {
	return s.hooks.AgentCredential(ctx, name)
}

// HandleJoinComplete registers the joiner once its k3s agent has joined. The request
// repeats the join request and arrives over TLS presenting the member certificate from
// HandleJoin (peer), which must be signed by the cluster CA for client use and name
// req.Name. In one transaction the token is consumed, the member recorded and its
// certificate trusted; then Admit labels its node. Repeating a completion that already
// succeeded with the same certificate admits and returns the member again, so a joiner
// that lost the answer (or whose admission failed) can retry.
func (s *Service) HandleJoinComplete(ctx context.Context, req api.JoinRequest, peer *x509.Certificate) (api.Member, error) {
	if err := ValidateJoinRequest(req, false); err != nil {
		return api.Member{}, err
	}
	if peer == nil {
		return api.Member{}, rest.Errorf(rest.ErrUnauthorized, "completing a join needs the member certificate the join returned, presented as the TLS client certificate")
	}
	if err := s.checkMemberCert(peer, req.Name); err != nil {
		return api.Member{}, err
	}
	fp := Fingerprint(peer)
	roles, err := s.VerifyToken(ctx, req.Name, req.Secret)
	if err != nil {
		if !errors.Is(err, ErrTokenConsumed) {
			return api.Member{}, err
		}
		m, merr := s.db.GetMember(ctx, req.Name)
		if merr != nil || m.Fingerprint != fp {
			return api.Member{}, err
		}
		return s.admit(ctx, m)
	}
	// Checked again: another host of the same hostname may have completed its join
	// since this one's first step.
	if err := checkHostname(ctx, s, req, true); err != nil {
		return api.Member{}, err
	}
	now := s.now()
	rec := store.MemberRecord{Name: req.Name, Address: req.Address, Fingerprint: fp, Roles: roles, JoinedAt: now, Hostname: req.Hostname}
	trust := store.TrustRecord{Fingerprint: fp, Name: req.Name, Kind: TrustKindMember, CertPEM: string(pemCert(peer)), AddedAt: now}
	if err := s.db.CompleteJoin(ctx, rec, trust, now); err != nil {
		switch {
		case errors.Is(err, store.ErrExists):
			return api.Member{}, errorf(ErrAlreadyMember, "%s or its certificate is already registered: remove it first (osd cluster remove %s)", req.Name, req.Name)
		case errors.Is(err, store.ErrNotFound):
			return api.Member{}, errorf(ErrTokenConsumed, "the join token for %s was used or revoked meanwhile: issue a new one (osd cluster add %s)", req.Name, req.Name)
		}
		return api.Member{}, err
	}
	if err := s.reloadTrust(ctx); err != nil {
		return api.Member{}, err
	}
	return s.admit(ctx, rec)
}

// admit runs Admit for a registered member and returns it.
func (s *Service) admit(ctx context.Context, m store.MemberRecord) (api.Member, error) {
	if err := s.hooks.Admit(ctx, m.Name, m.Roles); err != nil {
		return api.Member{}, rest.Errorf(rest.ErrNotReady, "%s is registered, but its node could not be admitted yet (retry): %w", m.Name, err)
	}
	return memberFromRecord(m), nil
}

// checkMemberCert verifies that cert was issued by the cluster CA to name for client use.
func (s *Service) checkMemberCert(cert *x509.Certificate, name string) error {
	roots := x509.NewCertPool()
	roots.AddCert(s.ca.Cert)
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
	if s.trust == nil {
		return nil
	}
	if err := s.trust.Load(ctx, s.db); err != nil {
		return fmt.Errorf("reload trusted certificates: %w", err)
	}
	return nil
}
