package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/client"
	"github.com/osdcloud/osd/daemon/rest"
	"github.com/osdcloud/osd/daemon/store"
)

// versions remembers what each member said in its heartbeats: its osd version and the
// images it holds (in memory: the next heartbeat after a restart brings it back).
type versions struct {
	mu     sync.Mutex
	m      map[string]string
	images map[string]map[string]string
}

func (v *versions) set(name, version string, images map[string]string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil {
		v.m, v.images = map[string]string{}, map[string]map[string]string{}
	}
	v.m[name] = version
	if images != nil {
		v.images[name] = images
	}
}

func (v *versions) get(name string) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.m[name]
}

func (v *versions) heldImages(name string) map[string]string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.images[name]
}

func (v *versions) forget(name string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.m, name)
	delete(v.images, name)
}

// ListMembers returns this daemon (when Local says it is a member) and every joined member,
// each with its Kubernetes node state and osd version.
func (s *Service) ListMembers(ctx context.Context) ([]api.Member, error) {
	recs, err := s.db.ListMembers(ctx)
	if err != nil {
		return nil, err
	}
	var out []api.Member
	if self := s.hooks.Local(); self != nil {
		out = append(out, *self)
	}
	for _, r := range recs {
		m := memberFromRecord(r)
		m.Version, m.HeldImages = s.versions.get(m.Name), s.versions.heldImages(m.Name)
		out = append(out, m)
	}
	states, statesErr := s.hooks.NodeStates(ctx)
	for i := range out {
		out[i].NodeState = NodeStateOf(states, statesErr, out[i].Name)
	}
	s.hooks.Describe(ctx, out)
	return out, nil
}

// NodeStateOf is the node state shown for name (pure): unknown when the states could not
// be read, absent when name has no node.
func NodeStateOf(states map[string]string, err error, name string) string {
	if err != nil {
		return api.NodeUnknown
	}
	if st, ok := states[name]; ok {
		return st
	}
	return api.NodeAbsent
}

func (s *Service) deleteMember(r *http.Request) rest.Response {
	name := rest.Var(r, "name")
	force := r.URL.Query().Get("force")
	if force != "" && force != "true" && force != "1" && force != "false" && force != "0" {
		return rest.ErrorResponse(errorf(ErrInvalid, "force=%q, want true or false", force))
	}
	m, err := s.db.GetMember(r.Context(), name)
	if errors.Is(err, store.ErrNotFound) {
		return rest.ErrorResponse(errorf(ErrNotMember, "%s is not a member of the cluster (osd cluster list)", name))
	} else if err != nil {
		return rest.ErrorResponse(err)
	}
	if err := s.hooks.RemoveNode(r.Context(), name, force == "true" || force == "1"); err != nil {
		return rest.ErrorResponse(err)
	}
	if err := s.RemoveMember(r.Context(), name); err != nil {
		return rest.ErrorResponse(err)
	}
	s.versions.forget(name)
	if err := s.hooks.Peers(r.Context(), nil, []string{m.Address}); err != nil {
		slog.Error("close the host firewall to a removed member", "member", name, "err", err)
	}
	return rest.EmptySyncResponse
}

// FetchMembers asks the cluster at addr, as the member holding id, for its members.
func FetchMembers(ctx context.Context, id *MemberIdentity, addr string) ([]api.Member, error) {
	var out []api.Member
	err := callAddress(Fingerprint(id.CA), addr, &id.Cert, func(c *client.Client) error {
		return c.Query(ctx, http.MethodGet, "cluster/members", nil, &out)
	})
	return out, err
}

// SendHeartbeat tells the cluster at addr that this member (name, holding id) is alive,
// runs version and holds images (digests by name). Only an explicit answer that this member was removed (410 Gone) means
// it is no longer one (errors.Is(err, ErrRemoved)); any other refusal, such as 403 for a
// certificate that expired while the node was off, is an error to report and retry.
func SendHeartbeat(ctx context.Context, id *MemberIdentity, addr, name, version string, images map[string]string) error {
	err := callAddress(Fingerprint(id.CA), addr, &id.Cert, func(c *client.Client) error {
		return c.Query(ctx, http.MethodPost, "cluster/members/"+url.PathEscape(name)+"/heartbeat", api.HeartbeatRequest{Version: version, Images: images}, nil)
	})
	var apiErr *client.Error
	if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusGone {
		return &removedErr{msg: apiErr.Message}
	}
	return err
}

// ErrRemoved is matched (errors.Is) by a heartbeat the cluster answered with an explicit
// "this member was removed".
var ErrRemoved = errors.New("this node is no longer a member of the cluster")

type removedErr struct{ msg string }

func (e *removedErr) Error() string {
	return ErrRemoved.Error() + ": " + strings.TrimSpace(e.msg)
}
func (e *removedErr) Unwrap() error { return ErrRemoved }

// RenewMemberCert asks the cluster at addr for a new certificate for member name (holding
// id) and a key made here, and stores it under dir in place of the old one. The cluster
// keeps trusting the old certificate until the new one is first used, so a renewal whose
// answer was lost, or not saved, is simply asked for again.
func RenewMemberCert(ctx context.Context, dir string, id *MemberIdentity, addr, name string) (*MemberIdentity, error) {
	key, err := NewMemberKey(name)
	if err != nil {
		return nil, err
	}
	var resp api.RenewResponse
	err = callAddress(Fingerprint(id.CA), addr, &id.Cert, func(c *client.Client) error {
		return c.Query(ctx, http.MethodPost, "cluster/members/"+url.PathEscape(name)+"/certificate", api.RenewRequest{CSR: key.CSRPEM}, &resp)
	})
	if err != nil {
		return nil, fmt.Errorf("renew the member certificate of %s: %w", name, err)
	}
	return SaveMemberIdentity(dir, Fingerprint(id.CA), string(pemCert(id.CA)), resp.CertificatePEM, key.Key)
}

// RequestChassisCert asks the cluster at addr to sign member name's (holding id) OVN
// chassis certificate for systemID and the key of csrPEM; it returns the certificate and
// the OVN CA.
func RequestChassisCert(ctx context.Context, id *MemberIdentity, addr, name, systemID, csrPEM string) (certPEM, caPEM []byte, err error) {
	var resp api.ChassisCertResponse
	err = callAddress(Fingerprint(id.CA), addr, &id.Cert, func(c *client.Client) error {
		return c.Query(ctx, http.MethodPost, "cluster/members/"+url.PathEscape(name)+"/ovn-chassis", api.ChassisCertRequest{SystemID: systemID, CSR: csrPEM}, &resp)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("the OVN chassis certificate of %s: %w", name, err)
	}
	return []byte(resp.CertificatePEM), []byte(resp.CAPEM), nil
}
