package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/osdcloud/osd/daemon/cluster"
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
	d.clusterSvc = &cluster.Service{DB: d.db, CA: ca, Trust: d.trust, K3s: d.k3sJoinInfo, Addresses: d.remoteAddresses,
		NodeStates: d.nodeStates, Local: d.localMember, RemoveNode: d.removeNode}
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
	router := rest.NewRouter(d.endpoints(), rest.WithAuthorizer(cluster.Authorizer(d.trust.Trusted)), rest.WithHiddenInternalErrors())
	served := make(chan error, 1)
	sctx, stop := context.WithCancel(context.Background())
	go func() { served <- rest.Serve(sctx, tls.NewListener(l, rc.TLSConfig()), router) }()
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

// k3sJoinInfo is what a joining node's k3s agent needs: this server's supervisor URL and
// the agent token k3s wrote.
func (d *Daemon) k3sJoinInfo(ctx context.Context) (string, string, error) {
	if d.server == nil {
		return "", "", rest.Errorf(rest.ErrNotReady, "the embedded Kubernetes is not running here yet: run osd init first")
	}
	kc := d.k3sConfig()
	for _, f := range []string{"agent-token", "node-token"} {
		b, err := os.ReadFile(filepath.Join(kc.DataDir(), "server", f))
		if err == nil {
			return fmt.Sprintf("https://%s", net.JoinHostPort(d.publicIP(), fmt.Sprint(kc.APIPort))), strings.TrimSpace(string(b)), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", "", err
		}
	}
	return "", "", rest.Errorf(rest.ErrNotReady, "k3s has not written its agent token yet")
}
