// Package join is the daemon's join resource: POST /1.0/cluster/join-remote joins this
// host to the cluster a token names (checked here and by the cluster before anything is
// kept), then runs the join plan as an operation (the host preparation its roles need,
// the embedded k3s agent, the registration); a member sends heartbeats, renews its
// certificate, and stops when the cluster says it was removed. A join resumes at start.
package join

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/osdcloud/osd/bootstrap"
	bimages "github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/bootstrap/preflight"
	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/client"
	"github.com/osdcloud/osd/daemon/cluster"
	"github.com/osdcloud/osd/daemon/hostplan"
	"github.com/osdcloud/osd/daemon/rest"
	"github.com/osdcloud/osd/daemon/state"
	"github.com/osdcloud/osd/daemon/store"
	"github.com/osdcloud/osd/netsetup"
)

// joinNodeTimeout bounds the wait for a joining node to become Ready.
var joinNodeTimeout = 10 * time.Minute

// heartbeatInterval is how often a member tells the cluster it is alive.
var heartbeatInterval = 15 * time.Second

// Record is what a join keeps so that a restart can resume it and a member can restart
// its agent (the host record's join, store.Join: the token's name, secret and cluster,
// and the k3s join information). Hostname is this host's OS hostname as the join sent it
// ("" in records from before joins sent one); the completion sends the same.
type Record = store.Join

func request(r Record) api.JoinRequest {
	return api.JoinRequest{Name: r.Name, Secret: r.Secret, Address: r.Address, Hostname: r.Hostname}
}

// OperationKind is the kind of join operations.
const OperationKind = "join"

// Deps are what the join resource is given when it is made.
type Deps struct {
	// Address is this node's API address for the cluster's records ("" while the HTTPS
	// API does not listen).
	Address func() string
	// Images is this node's image resource: the join fetches the images of its roles
	// from the cluster with it, and the heartbeats report what it holds.
	Images ImageSync
	// Hostname is this host's OS hostname, which the join sends the cluster (nil:
	// os.Hostname).
	Hostname func() (string, error)
}

// ImageSync is what a member needs of its image resource (images.Service).
type ImageSync interface {
	SyncFromCluster(ctx context.Context, remote cluster.ImageSource, roles []string, emit func(string)) (bool, string, error)
	Held(ctx context.Context) (map[string]string, error)
}

// Service is the join resource of one daemon.
type Service struct {
	st       *state.State
	address  func() string
	images   ImageSync
	hostname func() (string, error)

	mu      sync.Mutex
	syncing bool // an image sync with the cluster runs
	opID    string
	lastErr string
	beating bool
	beatErr string // the last heartbeat's failure ("" when it went through)
}

// New returns the join resource of st.
func New(st *state.State, deps Deps) *Service {
	if deps.Hostname == nil {
		deps.Hostname = os.Hostname
	}
	return &Service{st: st, address: deps.Address, images: deps.Images, hostname: deps.Hostname}
}

// Endpoints are the join routes:
//
//	GET  /1.0/cluster/join-remote   -> JoinStatus
//	POST /1.0/cluster/join-remote   JoinRemoteRequest -> 202, the join's operation
func (s *Service) Endpoints() []rest.Endpoint {
	return []rest.Endpoint{{Path: "cluster/join-remote", Get: rest.Action{Handler: s.getJoinRemote}, Post: rest.Action{Handler: s.postJoinRemote}}}
}

func (s *Service) identityDir() string { return IdentityDir(s.st.Cfg) }

// IdentityDir is where a member keeps its member certificate.
func IdentityDir(cfg state.Config) string { return filepath.Join(cfg.ClusterDir(), "member") }

// loadJoin is this node's join record (nil when it never joined).
func (s *Service) loadJoin() (*Record, error) {
	h, err := s.st.Host(context.Background())
	if err != nil {
		return nil, fmt.Errorf("read join state: %w", err)
	}
	return h.Join, nil
}

// saveJoin records rec as this node's join (and, when tunnel is not "", the tunnel
// interface the join asked for; when release is not "", the cluster's OpenStack release)
// in the host record, in one transaction.
func (s *Service) saveJoin(ctx context.Context, rec Record, tunnel, release string) error {
	err := s.st.UpdateHost(ctx, func(h *store.Host) error {
		h.Join = &rec
		if release != "" {
			h.Release = release
		}
		if tunnel != "" {
			h.TunnelInterface = tunnel
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("save join state: %w", err)
	}
	return nil
}

// ValidateJoinToken decodes an encoded token for a node called nodeName at now (pure):
// the token must be well formed, for this node, and not expired. Errors are 400/403 for
// the API and say what to do.
func ValidateJoinToken(encoded, nodeName string, now time.Time) (cluster.Token, error) {
	tok, err := cluster.DecodeToken(encoded)
	if err != nil {
		return tok, rest.Errorf(rest.ErrBadRequest, "%v", err)
	}
	if tok.Name != nodeName {
		return tok, rest.Errorf(rest.ErrBadRequest, "this join token is for %s, but this node is called %s: issue a token for %s (osd cluster add %s on a member), or start this daemon with --node-name %s",
			tok.Name, nodeName, nodeName, nodeName, tok.Name)
	}
	if !now.Before(tok.Expires) {
		return tok, rest.Errorf(rest.ErrForbidden, "the join token for %s expired at %s: issue a new one (osd cluster add %s on a member)",
			tok.Name, tok.Expires.Format(time.RFC3339), tok.Name)
	}
	return tok, nil
}

// postJoinRemote joins this node to the cluster a token names. Everything that can be
// checked without changing anything is checked first (token, name, roles, then the
// cluster's own answer to the join request): a refusal leaves nothing stored here, and
// the cluster stores nothing before the join completes. Then it saves the credentials
// and runs the join plan as an operation.
func (s *Service) postJoinRemote(r *http.Request) rest.Response {
	var req api.JoinRemoteRequest
	if err := rest.DecodeJSON(r, &req, 16<<10); err != nil {
		return rest.ErrorResponse(err)
	}
	ctx := r.Context()
	if h, err := s.st.Host(ctx); err != nil {
		return rest.ErrorResponse(err)
	} else if h.Initialized {
		return rest.ErrorResponse(rest.Errorf(rest.ErrConflict, "osd init ran on this host: it is the first node of its own cluster and cannot join another (osd reset first)"))
	}
	rec, err := s.loadJoin()
	if err != nil {
		return rest.ErrorResponse(err)
	}
	if rec != nil {
		switch rec.State {
		case state.JoinMember:
			return rest.SyncResponse(s.joinStatus(rec))
		case state.JoinRemoved:
			return rest.ErrorResponse(rest.Errorf(rest.ErrConflict, "this node was removed from its cluster: run osd reset, then join again with a new token"))
		}
		// A join under way: resume it (the same token is still valid until it completes).
		op := s.startJoin(*rec)
		return rest.AsyncResponse("/1.0/operations/"+op, s.joinStatus(rec))
	}
	tok, err := ValidateJoinToken(req.Token, s.st.Cfg.NodeName, time.Now())
	if err != nil {
		return rest.ErrorResponse(err)
	}
	var asked []string
	if len(req.Roles) > 0 {
		if asked, err = cluster.NormalizeRoles(req.Roles); err != nil {
			return rest.ErrorResponse(rest.Errorf(rest.ErrBadRequest, "%v", err))
		}
	}
	key, err := cluster.NewMemberKey(tok.Name)
	if err != nil {
		return rest.ErrorResponse(err)
	}
	host, err := s.hostname()
	if err != nil {
		return rest.ErrorResponse(rest.Errorf(rest.ErrNotReady, "this host's hostname, which the cluster checks, cannot be read (%v): give the host one (hostnamectl set-hostname NAME) and join again", err))
	}
	jreq := api.JoinRequest{Name: tok.Name, Secret: tok.Secret, Address: s.ownAddress(), CSR: key.CSRPEM, Hostname: host}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	creds, server, err := cluster.RequestJoin(rctx, tok, jreq)
	if olderCluster(err) {
		// A cluster from before joins sent hostnames refuses the field: join as joiners
		// of its version did (it checks no hostname).
		slog.Warn("the cluster does not take a joining host's hostname: joining without it (no check that it is unique)", "server", server)
		jreq.Hostname = ""
		creds, server, err = cluster.RequestJoin(rctx, tok, jreq)
	}
	if err != nil {
		return rest.ErrorResponse(joinRefused(err))
	}
	if asked != nil && !slices.Equal(asked, creds.Roles) {
		return rest.ErrorResponse(rest.Errorf(rest.ErrBadRequest, "this node's roles come with its join token: %s, not %s (to change them, issue a new token on a member: osd cluster add %s --role %s)",
			strings.Join(creds.Roles, ","), strings.Join(asked, ","), tok.Name, strings.Join(asked, ",")))
	}
	// The joiner runs the cluster's release: it builds or fetches that release's images.
	release, err := bimages.RecordedRelease(creds.Release, true)
	if err != nil {
		return rest.ErrorResponse(rest.Errorf(rest.ErrBadRequest, "the cluster's cloud runs a release this osd does not know (%v): install the cluster's osd version on this host and join again", err))
	}
	tunnelIface := req.TunnelInterface
	if tunnelIface == "" {
		tunnelIface = netsetup.TunnelAuto
	}
	if err := hostplan.CheckTunnelInterface(tunnelIface); err != nil {
		return rest.ErrorResponse(err)
	}
	if _, err := cluster.SaveMemberIdentity(s.identityDir(), tok.Fingerprint, creds.CACertPEM, creds.MemberCertPEM, key.Key); err != nil {
		return rest.ErrorResponse(rest.Errorf(rest.ErrForbidden, "the cluster's credentials were refused (nothing was kept): %v", err))
	}
	jreq.CSR = ""
	rec = &Record{State: state.JoinJoining, Name: tok.Name, Secret: tok.Secret, Roles: creds.Roles, Fingerprint: tok.Fingerprint,
		Addresses: tok.Addresses, Server: server, Address: jreq.Address, K3sURL: creds.K3sServerURL, K3sToken: creds.K3sToken, Hostname: jreq.Hostname}
	if err := s.saveJoin(ctx, *rec, tunnelIface, release.Name); err != nil {
		return rest.ErrorResponse(err)
	}
	// This host's firewall (made by the join's first step) trusts the cluster's nodes.
	if err := hostplan.UpdateFirewallPeers(ctx, s.st, nil, append([]string{server}, tok.Addresses...), nil); err != nil {
		return rest.ErrorResponse(err)
	}
	if err := hostplan.RecordControlPeers(ctx, s.st, append([]string{server}, tok.Addresses...)); err != nil {
		return rest.ErrorResponse(err)
	}
	slog.Info("joining cluster", "name", rec.Name, "server", server, "roles", rec.Roles)
	op := s.startJoin(*rec)
	return rest.AsyncResponse("/1.0/operations/"+op, s.joinStatus(rec))
}

// joinRefused maps a failed join request to the local API's answer: the cluster's own
// refusal keeps its status and words; a pin mismatch is 403; unreachable addresses 503.
func joinRefused(err error) error {
	var apiErr *client.Error
	switch {
	case errors.As(err, &apiErr):
		base := rest.SentinelFor(apiErr.StatusCode)
		if base == nil {
			base = rest.ErrNotReady
		}
		return rest.Errorf(base, "the cluster refused the join: %s", apiErr.Message)
	case errors.Is(err, cluster.ErrPinMismatch):
		return rest.Errorf(rest.ErrForbidden, "no cluster address in the token proved to be the cluster the token names (nothing was sent): %v", err)
	}
	return rest.Errorf(rest.ErrNotReady, "%v", err)
}

// olderCluster says whether err is the refusal of a join request's hostname field by a
// cluster whose version predates it (its strict decoding names the unknown field).
func olderCluster(err error) bool {
	var apiErr *client.Error
	return errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusBadRequest &&
		strings.Contains(apiErr.Message, `unknown field "hostname"`)
}

// ownAddress is this node's API address for the cluster's records.
func (s *Service) ownAddress() string {
	if a := s.address(); a != "" {
		return a
	}
	_, port, err := net.SplitHostPort(state.DefaultHTTPSAddress)
	if err != nil {
		port = "8443"
	}
	return net.JoinHostPort(s.st.Cfg.PublicIP(), port)
}

func (s *Service) getJoinRemote(*http.Request) rest.Response {
	rec, err := s.loadJoin()
	if err != nil {
		return rest.ErrorResponse(err)
	}
	return rest.SyncResponse(s.joinStatus(rec))
}

func (s *Service) joinStatus(rec *Record) api.JoinStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec == nil {
		return api.JoinStatus{State: "none"}
	}
	return api.JoinStatus{State: rec.State, Name: rec.Name, Roles: rec.Roles, Server: rec.Server, Operation: s.opID, Error: s.lastErr,
		HeartbeatError: s.beatErr}
}

// startJoin runs the join plan as an operation unless one runs, and returns its id.
func (s *Service) startJoin(rec Record) string {
	op, started := s.st.Ops.Start(OperationKind, true, func(ctx context.Context, emit func(string)) (any, error) {
		err := s.runJoin(ctx, rec, emit)
		s.mu.Lock()
		if err != nil {
			s.lastErr = err.Error()
		}
		s.mu.Unlock()
		if err != nil {
			slog.Error("join failed; osd join resumes it", "err", err)
			return nil, err
		}
		cur, _ := s.loadJoin()
		return s.joinStatus(cur), nil
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if started {
		s.opID, s.lastErr = op.ID, ""
	}
	return op.ID
}

// runJoin runs preflight, then the join plan, then starts the heartbeats.
func (s *Service) runJoin(ctx context.Context, rec Record, emit func(string)) error {
	rep, err := preflight.Run(ctx, hostplan.PreflightConfig(s.st.Cfg), preflight.DefaultRequirements())
	if err != nil && len(rep.Findings) == 0 {
		return fmt.Errorf("preflight: %w", err)
	}
	for _, f := range rep.Findings {
		if f.Status == preflight.Fail {
			emit(fmt.Sprintf("preflight %s: FAILED: %s (fix: %s)", f.Check, f.Message, f.Fix))
		}
	}
	if rep.Failed {
		return errors.New("preflight failed: fix the failed checks (osd preflight shows them) and run osd join again")
	}
	emit("preflight: ok")
	if err := hostplan.RecordSysctls(ctx, s.st); err != nil {
		return err
	}
	// The firewall step trusts the cluster's addresses this node joined through before
	// anything else: a member whose daemon is older than its firewall has no peers recorded
	// yet, and would otherwise drop the cluster's kubelet, Geneve and Ceph traffic until
	// its first heartbeat lists the members.
	if err := hostplan.UpdateFirewallPeers(ctx, s.st, nil, append([]string{rec.Server}, rec.Addresses...), nil); err != nil {
		return err
	}
	if err := hostplan.RecordControlPeers(ctx, s.st, append([]string{rec.Server}, rec.Addresses...)); err != nil {
		return err
	}
	run := "join-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	err = bootstrap.ExecuteGraph(ctx, s.st.DB, run, s.plan(rep.Decisions, rec), bootstrap.Retry{Attempts: 1}, func(e bootstrap.Event) { emit(hostplan.StepLine(e)) })
	if err != nil {
		return err
	}
	s.startHeartbeats()
	return nil
}

// JoinSteps names the host preparation steps of the init plan a node with roles needs
// (pure): every node the host firewall (before its agent starts); compute KVM, Open
// vSwitch, its tunnel endpoint and libvirt; network Open vSwitch, the tunnel endpoint and
// the external network; storage the volume group; control nothing more on the host.
func JoinSteps(roles []string) map[string]bool {
	want := map[string]bool{hostplan.StepFirewall: true}
	for _, r := range roles {
		switch r {
		case api.RoleCompute:
			want["kvm-permissions"], want["openvswitch"], want["tunnel"], want["libvirt"] = true, true, true, true
		case api.RoleNetwork:
			want["openvswitch"], want["tunnel"], want["external-network"] = true, true, true
		case api.RoleStorage:
			want["volume-group"] = true
		}
	}
	return want
}

// AgentTaints are the taints a node with roles registers with (pure): without the control
// role, cluster.NoControlPlaneTaint (the cluster sets it too when it admits the node).
func AgentTaints(roles []string) []string {
	if cluster.WantsNoControlPlaneTaint(roles) {
		return []string{cluster.NoControlPlaneTaint + "=true:NoSchedule"}
	}
	return nil
}

// plan is the graph of idempotent steps that make this host a member: the host
// preparation steps of the init plan its roles need (JoinSteps), the embedded k3s as an
// agent of the cluster, its node Ready, the completed join (the cluster then gives the node
// the labels of its roles: a kubelet may not set those labels itself), then the images of
// its roles fetched from the cluster and imported into containerd (JoinNeeds says why in
// that order).
func (s *Service) plan(dec preflight.Decisions, rec Record) []bootstrap.Step {
	n := s.st.Node
	host := hostplan.HostSteps(s.st, dec, JoinSteps(rec.Roles))
	var hostNames []string
	for _, h := range host {
		hostNames = append(hostNames, h.Name)
	}
	needs := JoinNeeds(hostNames)
	return append(host,
		bootstrap.Step{Name: "kubernetes-agent", Needs: needs["kubernetes-agent"], Run: func(ctx context.Context) (bool, string, error) {
			return n.EnsureAgent(ctx, rec.K3sURL, rec.K3sToken, AgentTaints(rec.Roles))
		}},
		bootstrap.Step{Name: "kubernetes-node", Needs: needs["kubernetes-node"], Run: func(ctx context.Context) (bool, string, error) {
			// A node that cannot reach the cluster fails the join (osd join resumes it)
			// rather than waiting for ever.
			ctx, cancel := context.WithTimeout(ctx, joinNodeTimeout)
			defer cancel()
			return n.WaitReady(ctx)
		}},
		bootstrap.Step{Name: "cluster-member", Needs: needs["cluster-member"], Run: func(ctx context.Context) (bool, string, error) {
			changed, detail, err := s.completeJoin(ctx)
			if err == nil {
				s.refreshFirewallPeers(ctx, &rec) // as a member it may list the members now
			}
			return changed, detail, err
		}},
		bootstrap.Step{Name: "images", Needs: needs["images"], Run: func(ctx context.Context) (bool, string, error) {
			return s.syncImages(ctx, rec, func(string) {})
		}},
	)
}

// JoinNeeds is what each step of the join after the host preparation (hostSteps) waits
// for (pure). The images come last: the cluster serves them to members only, and the
// joiner's certificate is a member's once the join completes (until then only the join
// token vouches for it). The workloads the cluster schedules on the node meanwhile wait
// for their images (the kubelet tries again every few seconds) and start as each is
// imported.
func JoinNeeds(hostSteps []string) map[string][]string {
	return map[string][]string{
		"kubernetes-agent": hostSteps,
		"kubernetes-node":  {"kubernetes-agent"},
		"cluster-member":   {"kubernetes-node"},
		"images":           {"cluster-member"},
	}
}

// syncImages makes this node hold the images of its roles at the digests the cluster
// serves (fetched into its store; imported into containerd once it runs).
func (s *Service) syncImages(ctx context.Context, rec Record, emit func(string)) (bool, string, error) {
	id, err := cluster.LoadMemberIdentity(s.identityDir())
	if err != nil {
		return false, "", err
	}
	remote, err := cluster.NewClusterImages(id, rec.Server)
	if err != nil {
		return false, "", err
	}
	defer remote.Close()
	return s.images.SyncFromCluster(ctx, remote, rec.Roles, emit)
}

// completeJoin registers this node with the cluster (consuming the token) and forgets the
// token's secret.
func (s *Service) completeJoin(ctx context.Context) (bool, string, error) {
	rec, err := s.loadJoin()
	if err != nil || rec == nil {
		return false, "", fmt.Errorf("no join under way: %v", err)
	}
	if rec.State == state.JoinMember {
		return false, "member of the cluster at " + rec.Server, nil
	}
	id, err := cluster.LoadMemberIdentity(s.identityDir())
	if err != nil {
		return false, "", err
	}
	m, err := cluster.CompleteJoinWith(ctx, rec.Fingerprint, rec.Server, id.Cert, request(*rec))
	if err != nil {
		return false, "", fmt.Errorf("complete the join with %s: %w", rec.Server, err)
	}
	rec.State, rec.Secret = state.JoinMember, ""
	if err := s.saveJoin(ctx, *rec, "", ""); err != nil {
		return false, "", err
	}
	slog.Info("joined the cluster", "name", m.Name, "server", rec.Server, "roles", m.Roles)
	return true, fmt.Sprintf("member %s of the cluster at %s, roles %v", m.Name, rec.Server, m.Roles), nil
}

// ResumeAtStart continues at daemon start what a join left: a join under way runs
// again, a member starts its agent and heartbeats.
func (s *Service) ResumeAtStart(ctx context.Context) {
	rec, err := s.loadJoin()
	if err != nil {
		slog.Error("join state unreadable", "err", err)
		return
	}
	if rec == nil || rec.State == state.JoinRemoved {
		if rec != nil {
			slog.Warn("this node was removed from its cluster; osd reset cleans it")
		}
		return
	}
	slog.Info("resuming cluster membership", "state", rec.State, "server", rec.Server)
	s.startJoin(*rec)
}

// startHeartbeats tells the cluster every heartbeatInterval that this member is alive, and
// renews the member certificate once half of its life has passed. Only the cluster's
// explicit answer that this node was removed makes it record that and stop the daemon
// (which stops the embedded agent; osd reset then cleans the host); any other failure,
// such as a certificate that expired while the node was off, is reported (osd status)
// and retried.
func (s *Service) startHeartbeats() {
	s.mu.Lock()
	if s.beating {
		s.mu.Unlock()
		return
	}
	s.beating = true
	s.mu.Unlock()
	s.st.Go(func(ctx context.Context) {
		for beat := 0; ; beat++ {
			rec, err := s.loadJoin()
			if err == nil && rec != nil {
				err = s.heartbeat(ctx, rec)
				if err == nil && beat%imageSyncBeats == 0 {
					s.refreshFirewallPeers(ctx, rec)
				}
				if err == nil && beat%imageSyncBeats == imageSyncBeats-1 {
					s.syncImagesInBackground(rec)
				}
			}
			s.mu.Lock()
			s.beatErr = ""
			if err != nil {
				s.beatErr = err.Error()
			}
			s.mu.Unlock()
			if errors.Is(err, cluster.ErrRemoved) {
				slog.Error("the cluster removed this node: stopping the embedded Kubernetes agent (osd reset cleans this host)", "err", err)
				rec.State = state.JoinRemoved
				if serr := s.saveJoin(context.WithoutCancel(ctx), *rec, "", ""); serr != nil {
					slog.Error("record removal", "err", serr)
				}
				s.st.Stop(err)
				return
			}
			if err != nil && ctx.Err() == nil {
				slog.Warn("heartbeat failed; retrying", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(heartbeatInterval):
			}
		}
	})
}

// heartbeat sends one heartbeat, renewing the member certificate first when it is due.
func (s *Service) heartbeat(ctx context.Context, rec *Record) error {
	id, err := cluster.LoadMemberIdentity(s.identityDir())
	if err != nil {
		return err
	}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if cluster.MemberCertDue(id.Cert.Leaf, time.Now()) {
		renewed, err := cluster.RenewMemberCert(hctx, s.identityDir(), id, rec.Server, rec.Name)
		if err != nil {
			// The current certificate keeps working until it expires: say so, go on.
			slog.Warn("member certificate renewal failed; retrying at the next heartbeat", "err", err, "expires", id.Cert.Leaf.NotAfter)
		} else {
			slog.Info("member certificate renewed", "fingerprint", cluster.Fingerprint(renewed.Cert.Leaf), "expires", renewed.Cert.Leaf.NotAfter)
			id = renewed
		}
	}
	held, err := s.images.Held(hctx)
	if err != nil {
		slog.Debug("images held for the heartbeat", "err", err)
	}
	return cluster.SendHeartbeat(hctx, id, rec.Server, rec.Name, api.Version, held)
}

// refreshFirewallPeers makes this host's firewall trust the cluster's members as the
// cluster lists them now (a node that joined since, one that was removed), their Geneve
// endpoints (a node's tunnel address can be another than its API address, and is then
// also where its connections to this node come from), and the cluster's addresses this
// node joined through. It runs once the join completed, at the first heartbeat and then
// about once a minute.
func (s *Service) refreshFirewallPeers(ctx context.Context, rec *Record) {
	id, err := cluster.LoadMemberIdentity(s.identityDir())
	if err != nil {
		return
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ms, err := cluster.FetchMembers(fctx, id, rec.Server)
	if err != nil {
		slog.Warn("list the cluster's members for the firewall", "err", err)
		return
	}
	peers := append([]string{rec.Server}, rec.Addresses...)
	for _, m := range ms {
		peers = append(peers, m.Address)
		if f := strings.Fields(m.Tunnel); len(f) > 0 {
			peers = append(peers, f[len(f)-1]) // "geneve 10.0.0.2"
		}
	}
	if err := hostplan.UpdateFirewallPeers(ctx, s.st, peers, nil, nil); err != nil {
		slog.Warn("firewall peers", "err", err)
	}
}

// imageSyncBeats is how many heartbeats pass between two image syncs with the cluster: an
// image the cluster built or imported since reaches this node within a minute or so.
const imageSyncBeats = 4

// syncImagesInBackground fetches and imports what the cluster serves for this node's roles
// and it lacks, unless a sync runs already.
func (s *Service) syncImagesInBackground(rec *Record) {
	s.mu.Lock()
	if s.syncing {
		s.mu.Unlock()
		return
	}
	s.syncing = true
	s.mu.Unlock()
	s.st.Go(func(ctx context.Context) {
		defer func() { s.mu.Lock(); s.syncing = false; s.mu.Unlock() }()
		if changed, detail, err := s.syncImages(ctx, *rec, func(string) {}); err != nil && ctx.Err() == nil {
			slog.Warn("images from the cluster", "err", err)
		} else if changed {
			slog.Info("images from the cluster", "detail", detail)
		}
	})
}

// SignChassis asks the cluster this node joined to sign its OVN chassis certificate
// (ovnchassis.Signer); it fails until the node is a member.
func (s *Service) SignChassis(ctx context.Context, systemID, csrPEM string) ([]byte, []byte, error) {
	rec, err := s.loadJoin()
	if err != nil {
		return nil, nil, err
	}
	if rec == nil || rec.State != state.JoinMember {
		return nil, nil, errors.New("this node is not a member of a cluster")
	}
	id, err := cluster.LoadMemberIdentity(s.identityDir())
	if err != nil {
		return nil, nil, err
	}
	return cluster.RequestChassisCert(ctx, id, rec.Server, rec.Name, systemID, csrPEM)
}
