package daemon

import (
	"context"
	"encoding/json"
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

	"k8s.io/client-go/kubernetes"

	"github.com/osdcloud/osd/bootstrap"
	"github.com/osdcloud/osd/bootstrap/preflight"
	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/client"
	"github.com/osdcloud/osd/daemon/cluster"
	"github.com/osdcloud/osd/daemon/fsutil"
	"github.com/osdcloud/osd/daemon/k3s"
	"github.com/osdcloud/osd/daemon/rest"
)

// configJoin is the store key of this node's join: joinJoining from the moment the
// cluster handed out credentials (a restart resumes the join), joinMember once the
// join completed, joinRemoved once the cluster said it was removed.
const (
	configJoin   = "join.state"
	joinJoining  = "joining"
	joinMember   = "member"
	joinRemoved  = "removed"
	joinFileName = "join.json" // under STATE/cluster, 0600: the join's secrets
)

// joinNodeTimeout bounds the wait for a joining node to become Ready.
var joinNodeTimeout = 10 * time.Minute

// heartbeatInterval is how often a member tells the cluster it is alive.
var heartbeatInterval = 15 * time.Second

// JoinRemoteRequest is the body of POST /1.0/cluster/join-remote: join the cluster the
// token names. The node's roles come with the token (osd cluster add NAME --role ...);
// Roles, if given, must be the token's.
type JoinRemoteRequest struct {
	Token string   `json:"token"`
	Roles []string `json:"roles,omitempty"`
}

// JoinStatus is what GET /1.0/cluster/join-remote answers (and POST when there is nothing
// left to do): how far this node's join is.
type JoinStatus struct {
	State     string   `json:"state"` // none, joining, member, removed
	Name      string   `json:"name,omitempty"`
	Roles     []string `json:"roles,omitempty"`
	Server    string   `json:"server,omitempty"` // the member that let this node in
	Operation string   `json:"operation,omitempty"`
	Error     string   `json:"error,omitempty"` // the last attempt's failure
	// HeartbeatError is why the last heartbeat to the cluster failed ("" when it went
	// through): a member whose heartbeats fail is still one until the cluster says not.
	HeartbeatError string `json:"heartbeat_error,omitempty"`
}

// joinRecord is what a join keeps (0600) so that a restart can resume it and a member can
// restart its agent: the token's name, secret and cluster, and the k3s join information.
type joinRecord struct {
	State       string   `json:"state"`
	Name        string   `json:"name"`
	Secret      string   `json:"secret,omitempty"` // dropped once the join completed
	Roles       []string `json:"roles"`
	Fingerprint string   `json:"fingerprint"`
	Addresses   []string `json:"addresses"`
	Server      string   `json:"server"`  // the address that answered the join
	Address     string   `json:"address"` // this node's own API address
	K3sURL      string   `json:"k3s_server_url"`
	K3sToken    string   `json:"k3s_token"`
}

func (r joinRecord) request() cluster.JoinRequest {
	return cluster.JoinRequest{Name: r.Name, Secret: r.Secret, Address: r.Address}
}

// joiner is the daemon's join state in memory: one join operation at a time.
type joiner struct {
	mu      sync.Mutex
	opID    string
	running bool
	lastErr string
	beating bool
	beatErr string // the last heartbeat's failure ("" when it went through)
}

func (d *Daemon) identityDir() string { return filepath.Join(d.cfg.StateDir, "cluster", "member") }
func (d *Daemon) joinFile() string    { return filepath.Join(d.cfg.StateDir, "cluster", joinFileName) }

func (d *Daemon) loadJoin() (*joinRecord, error) {
	b, err := os.ReadFile(d.joinFile())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read join state: %w", err)
	}
	var rec joinRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("read join state %s: %w", d.joinFile(), err)
	}
	return &rec, nil
}

func (d *Daemon) saveJoin(ctx context.Context, rec joinRecord) error {
	b, _ := json.Marshal(rec)
	if err := os.MkdirAll(filepath.Dir(d.joinFile()), 0o700); err != nil {
		return fmt.Errorf("save join state: %w", err)
	}
	if err := fsutil.WriteFileAtomic(d.joinFile(), b, 0o600); err != nil {
		return fmt.Errorf("save join state: %w", err)
	}
	return d.db.SetConfig(ctx, configJoin, rec.State)
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
func (d *Daemon) postJoinRemote(r *http.Request) rest.Response {
	var req JoinRemoteRequest
	if err := rest.DecodeJSON(r, &req, 16<<10); err != nil {
		return rest.ErrorResponse(err)
	}
	ctx := r.Context()
	if v, _, err := d.db.GetConfig(ctx, configInitialized); err != nil {
		return rest.ErrorResponse(err)
	} else if v == "true" {
		return rest.ErrorResponse(rest.Errorf(rest.ErrConflict, "osd init ran on this host: it is the first node of its own cluster and cannot join another (osd reset first)"))
	}
	rec, err := d.loadJoin()
	if err != nil {
		return rest.ErrorResponse(err)
	}
	if rec != nil {
		switch rec.State {
		case joinMember:
			return rest.SyncResponse(d.joinStatus(rec))
		case joinRemoved:
			return rest.ErrorResponse(rest.Errorf(rest.ErrConflict, "this node was removed from its cluster: run osd reset, then join again with a new token"))
		}
		// A join under way: resume it (the same token is still valid until it completes).
		op := d.startJoin(*rec)
		return rest.AsyncResponse("/1.0/operations/"+op, d.joinStatus(rec))
	}
	tok, err := ValidateJoinToken(req.Token, d.cfg.NodeName, time.Now())
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
	jreq := cluster.JoinRequest{Name: tok.Name, Secret: tok.Secret, Address: d.ownAddress(), CSR: key.CSRPEM}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	creds, server, err := cluster.RequestJoin(rctx, tok, jreq)
	if err != nil {
		return rest.ErrorResponse(joinRefused(err))
	}
	if asked != nil && !slices.Equal(asked, creds.Roles) {
		return rest.ErrorResponse(rest.Errorf(rest.ErrBadRequest, "this node's roles come with its join token: %s, not %s (to change them, issue a new token on a member: osd cluster add %s --role %s)",
			strings.Join(creds.Roles, ","), strings.Join(asked, ","), tok.Name, strings.Join(asked, ",")))
	}
	if _, err := cluster.SaveMemberIdentity(d.identityDir(), tok.Fingerprint, creds.CACertPEM, creds.MemberCertPEM, key.Key); err != nil {
		return rest.ErrorResponse(rest.Errorf(rest.ErrForbidden, "the cluster's credentials were refused (nothing was kept): %v", err))
	}
	jreq.CSR = ""
	rec = &joinRecord{State: joinJoining, Name: tok.Name, Secret: tok.Secret, Roles: creds.Roles, Fingerprint: tok.Fingerprint,
		Addresses: tok.Addresses, Server: server, Address: jreq.Address, K3sURL: creds.K3sServerURL, K3sToken: creds.K3sToken}
	if err := d.saveJoin(ctx, *rec); err != nil {
		return rest.ErrorResponse(err)
	}
	slog.Info("joining cluster", "name", rec.Name, "server", server, "roles", rec.Roles)
	op := d.startJoin(*rec)
	return rest.AsyncResponse("/1.0/operations/"+op, d.joinStatus(rec))
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

// ownAddress is this node's API address for the cluster's records.
func (d *Daemon) ownAddress() string {
	if a := d.remoteAddresses(); len(a) > 0 {
		return a[0]
	}
	_, port, err := net.SplitHostPort(DefaultHTTPSAddress)
	if err != nil {
		port = "8443"
	}
	return net.JoinHostPort(d.publicIP(), port)
}

func (d *Daemon) getJoinRemote(*http.Request) rest.Response {
	rec, err := d.loadJoin()
	if err != nil {
		return rest.ErrorResponse(err)
	}
	return rest.SyncResponse(d.joinStatus(rec))
}

func (d *Daemon) joinStatus(rec *joinRecord) JoinStatus {
	d.join.mu.Lock()
	defer d.join.mu.Unlock()
	if rec == nil {
		return JoinStatus{State: "none"}
	}
	return JoinStatus{State: rec.State, Name: rec.Name, Roles: rec.Roles, Server: rec.Server, Operation: d.join.opID, Error: d.join.lastErr,
		HeartbeatError: d.join.beatErr}
}

// startJoin runs the join plan as an operation unless one runs, and returns its id.
func (d *Daemon) startJoin(rec joinRecord) string {
	d.join.mu.Lock()
	defer d.join.mu.Unlock()
	if d.join.running {
		return d.join.opID
	}
	d.join.running, d.join.lastErr = true, ""
	op := d.ops.start(d.runCtx, &d.wg, "join", func(ctx context.Context, emit func(string)) (any, error) {
		err := d.runJoin(ctx, rec, emit)
		d.join.mu.Lock()
		d.join.running = false
		if err != nil {
			d.join.lastErr = err.Error()
		}
		d.join.mu.Unlock()
		if err != nil {
			slog.Error("join failed; osd join resumes it", "err", err)
			return nil, err
		}
		cur, _ := d.loadJoin()
		return d.joinStatus(cur), nil
	})
	d.join.opID = op.ID
	return op.ID
}

// runJoin runs preflight, then the join plan, then starts the heartbeats.
func (d *Daemon) runJoin(ctx context.Context, rec joinRecord, emit func(string)) error {
	rep, err := preflight.Run(ctx, d.preflightConfig(), preflight.DefaultRequirements())
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
	if _, ok, err := d.db.GetConfig(ctx, configSysctls); err != nil {
		return err
	} else if !ok {
		b, _ := json.Marshal(k3s.ReadSysctls())
		if err := d.db.SetConfig(ctx, configSysctls, string(b)); err != nil {
			return fmt.Errorf("record sysctls: %w", err)
		}
	}
	run := "join-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	err = bootstrap.Execute(ctx, d.db, run, d.joinPlan(rep.Decisions, rec), func(e bootstrap.Event) {
		switch {
		case !e.Done:
			emit(fmt.Sprintf("%s ...", e.Step))
		case e.Error != "":
			emit(fmt.Sprintf("%s: FAILED: %s (%s)", e.Step, e.Error, e.Took.Round(100*time.Millisecond)))
		default:
			msg := "unchanged"
			if e.Changed {
				msg = "changed"
			}
			if e.Detail != "" {
				msg += ": " + e.Detail
			}
			emit(fmt.Sprintf("%s: %s (%s)", e.Step, msg, e.Took.Round(100*time.Millisecond)))
		}
	})
	if err != nil {
		return err
	}
	d.startHeartbeats()
	return nil
}

// JoinSteps names the host preparation steps of the init plan a node with roles needs
// (pure): compute needs KVM, Open vSwitch and libvirt; network Open vSwitch and the
// external network; storage the volume group; control nothing on the host.
func JoinSteps(roles []string) map[string]bool {
	want := map[string]bool{}
	for _, r := range roles {
		switch r {
		case cluster.RoleCompute:
			want["kvm-permissions"], want["openvswitch"], want["libvirt"] = true, true, true
		case cluster.RoleNetwork:
			want["openvswitch"], want["external-network"] = true, true
		case cluster.RoleStorage:
			want["volume-group"] = true
		}
	}
	return want
}

// joinPlan is the ordered list of idempotent steps that make this host a member: the
// host preparation steps of the init plan its roles need (JoinSteps), the embedded k3s
// as an agent of the cluster, its node Ready (with its role labels, RoleLabels, set by
// the kubelet at registration: the node carries them from its first moment and needs no
// credentials to label other nodes), and the completed join.
func (d *Daemon) joinPlan(dec preflight.Decisions, rec joinRecord) []bootstrap.Step {
	want := JoinSteps(rec.Roles)
	var steps []bootstrap.Step
	for _, s := range d.plan(dec, false) {
		if want[s.Name] {
			steps = append(steps, s)
		}
	}
	return append(steps,
		bootstrap.Step{Name: "kubernetes-agent", Run: func(ctx context.Context) (bool, string, error) { return d.ensureAgent(ctx, rec) }},
		bootstrap.Step{Name: "kubernetes-node", Run: func(ctx context.Context) (bool, string, error) {
			// A node that cannot reach the cluster fails the join (osd join resumes it)
			// rather than waiting for ever.
			ctx, cancel := context.WithTimeout(ctx, joinNodeTimeout)
			defer cancel()
			return d.waitNodeReady(ctx)
		}},
		bootstrap.Step{Name: "cluster-member", Run: func(ctx context.Context) (bool, string, error) { return d.completeJoin(ctx) }},
	)
}

// ensureAgent starts containerd and the embedded k3s agent once per daemon process.
func (d *Daemon) ensureAgent(ctx context.Context, rec joinRecord) (bool, string, error) {
	d.k8sOnce.Lock()
	defer d.k8sOnce.Unlock()
	if d.server != nil {
		return false, "running", nil
	}
	// No role labels here: a kubelet may not set them (RoleLabelPrefix); the cluster
	// gives them when the join completes.
	kc := d.k3sConfig()
	if _, err := k3s.AgentArgs(kc, rec.K3sURL, rec.K3sToken); err != nil {
		return false, "", fmt.Errorf("the cluster's join information: %w", err)
	}
	if err := k3s.Prepare(kc, d.cfg.Self); err != nil {
		return false, "", err
	}
	logf, err := os.OpenFile(kc.LogDir()+"/containerd.log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return false, "", fmt.Errorf("open containerd log: %w", err)
	}
	d.onStop(func(context.Context) error { return logf.Close() })
	cd, err := k3s.StartContainerd(ctx, kc, d.cfg.Self, logf, 30*time.Second)
	if err != nil {
		return false, "", err
	}
	d.containerd = cd
	if err := d.ensurePauseImage(ctx, kc); err != nil {
		cd.Stop(ctx, false)
		d.containerd = nil
		return false, "", err
	}
	srv, err := k3s.StartAgent(kc, rec.K3sURL, rec.K3sToken)
	if err != nil {
		return false, "", err
	}
	d.server = srv
	d.watchAgent(d.runCtx, kc)
	return true, fmt.Sprintf("containerd and the k3s agent started (server %s)", rec.K3sURL), nil
}

// watchAgent keeps the node state current through the kubelet's own credentials, writes
// the pod network configuration once the node has a pod CIDR, and stops the daemon if
// k3s or containerd end on their own (as watchKubernetes does for a server).
func (d *Daemon) watchAgent(ctx context.Context, kc k3s.Config) {
	d.watchNode(ctx, kc, "embedded k3s agent", "waiting for the k3s agent to join "+kc.NodeName+" to the cluster",
		func() kubernetes.Interface { return probeClient(k3s.AgentRESTConfig, kc.Paths) })
}

// completeJoin registers this node with the cluster (consuming the token) and forgets the
// token's secret.
func (d *Daemon) completeJoin(ctx context.Context) (bool, string, error) {
	rec, err := d.loadJoin()
	if err != nil || rec == nil {
		return false, "", fmt.Errorf("no join under way: %v", err)
	}
	if rec.State == joinMember {
		return false, "member of the cluster at " + rec.Server, nil
	}
	id, err := cluster.LoadMemberIdentity(d.identityDir())
	if err != nil {
		return false, "", err
	}
	m, err := cluster.CompleteJoinWith(ctx, rec.Fingerprint, rec.Server, id.Cert, rec.request())
	if err != nil {
		return false, "", fmt.Errorf("complete the join with %s: %w", rec.Server, err)
	}
	rec.State, rec.Secret = joinMember, ""
	if err := d.saveJoin(ctx, *rec); err != nil {
		return false, "", err
	}
	slog.Info("joined the cluster", "name", m.Name, "server", rec.Server, "roles", m.Roles)
	return true, fmt.Sprintf("member %s of the cluster at %s, roles %v", m.Name, rec.Server, m.Roles), nil
}

// resumeJoin continues at daemon start what a join left: a join under way runs again, a
// member starts its agent and heartbeats.
func (d *Daemon) resumeJoin(ctx context.Context) {
	rec, err := d.loadJoin()
	if err != nil {
		slog.Error("join state unreadable", "err", err)
		return
	}
	if rec == nil || rec.State == joinRemoved {
		if rec != nil {
			slog.Warn("this node was removed from its cluster; osd reset cleans it")
		}
		return
	}
	slog.Info("resuming cluster membership", "state", rec.State, "server", rec.Server)
	d.startJoin(*rec)
}

// startHeartbeats tells the cluster every heartbeatInterval that this member is alive, and
// renews the member certificate once half of its life has passed. Only the cluster's
// explicit answer that this node was removed makes it record that and stop the daemon
// (which stops the embedded agent; osd reset then cleans the host); any other failure,
// such as a certificate that expired while the node was off, is reported (osd status)
// and retried.
func (d *Daemon) startHeartbeats() {
	d.join.mu.Lock()
	if d.join.beating {
		d.join.mu.Unlock()
		return
	}
	d.join.beating = true
	d.join.mu.Unlock()
	ctx := d.runCtx
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		for {
			rec, err := d.loadJoin()
			if err == nil && rec != nil {
				err = d.heartbeat(ctx, rec)
			}
			d.join.mu.Lock()
			d.join.beatErr = ""
			if err != nil {
				d.join.beatErr = err.Error()
			}
			d.join.mu.Unlock()
			if errors.Is(err, cluster.ErrRemoved) {
				slog.Error("the cluster removed this node: stopping the embedded Kubernetes agent (osd reset cleans this host)", "err", err)
				rec.State = joinRemoved
				if serr := d.saveJoin(context.WithoutCancel(ctx), *rec); serr != nil {
					slog.Error("record removal", "err", serr)
				}
				select {
				case d.failed <- err:
				default:
				}
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
	}()
}

// heartbeat sends one heartbeat, renewing the member certificate first when it is due.
func (d *Daemon) heartbeat(ctx context.Context, rec *joinRecord) error {
	id, err := cluster.LoadMemberIdentity(d.identityDir())
	if err != nil {
		return err
	}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if cluster.MemberCertDue(id.Cert.Leaf, time.Now()) {
		renewed, err := cluster.RenewMemberCert(hctx, d.identityDir(), id, rec.Server, rec.Name)
		if err != nil {
			// The current certificate keeps working until it expires: say so, go on.
			slog.Warn("member certificate renewal failed; retrying at the next heartbeat", "err", err, "expires", id.Cert.Leaf.NotAfter)
		} else {
			slog.Info("member certificate renewed", "fingerprint", cluster.Fingerprint(renewed.Cert.Leaf), "expires", renewed.Cert.Leaf.NotAfter)
			id = renewed
		}
	}
	return cluster.SendHeartbeat(hctx, id, rec.Server, rec.Name, api.Version)
}
