package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/osdcloud/osd/daemon/cluster"
	"github.com/osdcloud/osd/daemon/rest"
)

// startRemote sets up the cluster identity (CA, server certificate renewed in place, trust
// set, token service) and serves the API over HTTPS with mutual TLS.
func (d *Daemon) startRemote(ctx context.Context) error {
	dir := d.cfg.ClusterDir()
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
	if err := d.trust.Load(ctx, d.st.DB); err != nil {
		return err
	}
	// The membership resource is what the cluster's server side asks of Kubernetes, the
	// cloud and this host.
	var hooks cluster.Hooks = d.members
	if d.wrapHooks != nil {
		hooks = d.wrapHooks(hooks)
	}
	d.clusterSvc = cluster.New(cluster.Config{DB: d.st.DB, CA: ca, Trust: d.trust, Addresses: d.remoteAddresses,
		MemberCertLifetime: d.cfg.MemberCertLifetime}, hooks)
	d.st.Go(d.members.KeepAdmission)
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
	if ip := net.ParseIP(d.cfg.PublicIP()); ip != nil && !ip.IsLoopback() {
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
		host = d.cfg.PublicIP()
	}
	return []string{net.JoinHostPort(host, port)}
}

// Bounds on one HTTPS request: its body must have arrived within httpsReadTimeout, its
// answer left within httpsWriteTimeout (the API's answers are small).
const (
	httpsReadTimeout  = 30 * time.Second
	httpsWriteTimeout = 2 * time.Minute
)

// ownAddress is this daemon's HTTPS address for members' records ("" when it does not listen).
func (d *Daemon) ownAddress() string {
	if a := d.remoteAddresses(); len(a) > 0 {
		return a[0]
	}
	return ""
}
