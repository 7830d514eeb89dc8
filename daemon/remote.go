package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	"github.com/osdcloud/osd/daemon/cluster"
	"github.com/osdcloud/osd/daemon/k3s"
	"github.com/osdcloud/osd/daemon/rest"
)

// DefaultHTTPSAddress is where the remote API listens (mTLS for trusted clients and
// members; only the join endpoint is open, to callers holding a valid join token).
const DefaultHTTPSAddress = ":8443"

// startRemote sets up the cluster identity (CA, server certificate renewed in place, trust
// set, token service) and serves the API over HTTPS with mutual TLS.
func (d *Daemon) startRemote(ctx context.Context) error {
	dir := filepath.Join(d.cfg.StateDir, "cluster")
	ca, err := cluster.EnsureCA(dir)
	if err != nil {
		return fmt.Errorf("cluster identity: %w", err)
	}
	names, ips := d.certNames()
	rc, err := cluster.NewRenewingCert(ca, dir, names, ips)
	if err != nil {
		return fmt.Errorf("server certificate: %w", err)
	}
	d.trust = &cluster.TrustSet{}
	if err := d.trust.Load(ctx, d.db); err != nil {
		return err
	}
	d.clusterSvc = &cluster.Service{DB: d.db, CA: ca, Trust: d.trust, Agent: d.agentCredential, Addresses: d.remoteAddresses,
		MemberCertLifetime: d.cfg.MemberCertLifetime, NodeStates: d.nodeStates, Local: d.localMember,
		RemoveNode: d.removeNode, Admit: d.admitMember, TokenIssued: d.letNodeIn, TokenDropped: d.dropAgentTokens}
	go rc.Run(ctx, 12*time.Hour)
	go d.clusterSvc.RunPurge(ctx, time.Hour)
	if d.cfg.HTTPSAddress == "none" {
		return nil
	}
	l, err := net.Listen("tcp", d.cfg.HTTPSAddress)
	if err != nil {
		return fmt.Errorf("remote API on %s: %w (choose another with --https-address, or none)", d.cfg.HTTPSAddress, err)
	}
	d.httpsAddr = l.Addr().String()
	limits := cluster.DefaultGuardLimits
	guard := cluster.NewGuard(l, rc.TLSConfig(), d.trust, limits)
	router := rest.NewRouter(d.endpoints(), rest.WithAuthorizer(cluster.Authorizer(d.trust, access(), limits)), rest.WithHiddenInternalErrors())
	served := make(chan error, 1)
	sctx, stop := context.WithCancel(context.Background())
	go func() {
		served <- rest.Serve(sctx, guard, router, rest.WithTimeouts(httpsReadTimeout, httpsWriteTimeout),
			rest.WithConnState(guard.ConnState), rest.WithMaxHeaderBytes(64<<10))
	}()
	d.onStop(func(context.Context) error { stop(); return <-served })
	slog.Info("remote API listening", "address", d.httpsAddr, "ca_fingerprint", ca.Fingerprint())
	return nil
}

// certNames are the names and addresses the server certificate is valid for.
func (d *Daemon) certNames() ([]string, []net.IP) {
	names := []string{d.cfg.NodeName, "localhost"}
	ips := []net.IP{net.IPv4(127, 0, 0, 1)}
	if ip := net.ParseIP(d.publicIP()); ip != nil && !ip.IsLoopback() {
		ips = append(ips, ip)
	}
	return names, ips
}

// remoteAddresses are the host:port addresses a joining node can reach this daemon at.
func (d *Daemon) remoteAddresses() []string {
	if d.httpsAddr == "" {
		return nil
	}
	_, port, _ := net.SplitHostPort(d.httpsAddr)
	host, _, _ := net.SplitHostPort(d.cfg.HTTPSAddress)
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = d.publicIP()
	}
	return []string{net.JoinHostPort(host, port)}
}

// Bounds on one HTTPS request: its body must have arrived within httpsReadTimeout, its
// answer left within httpsWriteTimeout (the API's answers are small).
const (
	httpsReadTimeout  = 30 * time.Second
	httpsWriteTimeout = 2 * time.Minute
)

// DefaultAgentTokenTTL is how long the credential a joining node's k3s agent registers with
// stays valid: long enough for a join, dropped as soon as the join completes.
const DefaultAgentTokenTTL = 15 * time.Minute

// agentCredential issues node name's k3s agent credential: a bootstrap token for this
// join only, with this server's supervisor URL (the cluster's server token never leaves
// this host).
func (d *Daemon) agentCredential(ctx context.Context, name string) (cluster.AgentCredential, error) {
	if d.server == nil {
		return cluster.AgentCredential{}, rest.Errorf(rest.ErrNotReady, "the embedded Kubernetes is not running here yet: run osd init first")
	}
	cs, err := d.adminClient()
	if err != nil {
		return cluster.AgentCredential{}, err
	}
	ttl := d.cfg.AgentTokenTTL
	if ttl <= 0 {
		ttl = DefaultAgentTokenTTL
	}
	kc := d.k3sConfig()
	tok, expires, err := k3s.CreateAgentToken(ctx, cs, kc.Paths, name, ttl)
	if err != nil {
		return cluster.AgentCredential{}, err
	}
	return cluster.AgentCredential{ServerURL: fmt.Sprintf("https://%s", net.JoinHostPort(d.publicIP(), fmt.Sprint(kc.APIPort))),
		Token: tok, Expires: expires}, nil
}

// admitMember gives a member that completed its join the labels of its roles and drops
// the agent credential it joined with (its kubelet certificate is what it uses now).
func (d *Daemon) admitMember(ctx context.Context, name string, roles []string) error {
	cs, err := d.adminClient()
	if err != nil {
		return err
	}
	if _, _, err := labelNodeRoles(ctx, cs, name, roles); err != nil {
		return err
	}
	return k3s.DeleteAgentTokens(ctx, cs, name)
}

// letNodeIn lets a node called name register again (a join token was issued for it).
func (d *Daemon) letNodeIn(ctx context.Context, name string) error {
	cs, err := d.adminClient()
	if err != nil {
		// No Kubernetes here yet: nothing can have barred the name.
		slog.Debug("no Kubernetes to let a node in", "node", name, "err", err)
		return nil
	}
	return k3s.UnbarNode(ctx, cs, name)
}

// dropAgentTokens deletes the agent credentials issued for name.
func (d *Daemon) dropAgentTokens(ctx context.Context, name string) error {
	cs, err := d.adminClient()
	if err != nil {
		return nil // no Kubernetes here: no credential was issued
	}
	return k3s.DeleteAgentTokens(ctx, cs, name)
}
