package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// ServerTLSConfig is the HTTPS listener's configuration: TLS 1.3 only, serverCert (with
// its CA in the chain, as EnsureServerCert returns it), and client certificates requested
// but not required, because the join endpoint must be reachable without one. Whether a
// presented client certificate is trusted is the Authorizer's decision (the TLS layer
// still proves the client holds its key).
func ServerTLSConfig(serverCert tls.Certificate) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{serverCert},
		ClientAuth:   tls.RequestClientCert,
		NextProtos:   []string{"http/1.1"},
	}
}

// ErrPinMismatch is returned (wrapped) when a server does not present the pinned CA.
var ErrPinMismatch = errors.New("server certificate does not match the pinned cluster fingerprint")

// ClientTLSConfig is the configuration for talking to the cluster at host (the host part
// of the address dialled: a name or an IP address): the server must present a chain
// holding the CA certificate whose fingerprint is pin (64 hex digits), and its leaf must be
// signed by that CA for server use and name host. System roots play no part. The check
// runs inside the handshake, before the client sends its certificate or any request.
// clientCert, if not nil, is presented when the server asks.
func ClientTLSConfig(pin, host string, clientCert *tls.Certificate) (*tls.Config, error) {
	if err := ValidateFingerprint(pin); err != nil {
		return nil, fmt.Errorf("pinned cluster %w", err)
	}
	if host == "" {
		return nil, errors.New("the cluster's host name or address is needed to check its certificate")
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{"http/1.1"},
		// Verification is ours (VerifyConnection): pinned CA, no system roots.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyPinned(cs.PeerCertificates, pin, host, time.Now())
		},
	}
	if clientCert != nil {
		cert := *clientCert
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	}
	return cfg, nil
}

// ClientTLSConfigFor is ClientTLSConfig for the host of addr (host:port).
func ClientTLSConfigFor(pin, addr string, clientCert *tls.Certificate) (*tls.Config, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("cluster address %q is not host:port", addr)
	}
	return ClientTLSConfig(pin, host, clientCert)
}

// verifyPinned checks a presented chain against the pinned CA fingerprint and host.
func verifyPinned(chain []*x509.Certificate, pin, host string, now time.Time) error {
	if len(chain) == 0 {
		return fmt.Errorf("%w: the server presented no certificate", ErrPinMismatch)
	}
	var ca *x509.Certificate
	for _, c := range chain {
		if Fingerprint(c) == pin {
			ca = c
			break
		}
	}
	if ca == nil {
		got := make([]string, len(chain))
		for i, c := range chain {
			got[i] = Fingerprint(c)
		}
		return fmt.Errorf("%w: want CA %s, the server presented %v; refusing to send anything (another cluster, or someone in the middle)",
			ErrPinMismatch, pin, got)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	_, err := chain[0].Verify(x509.VerifyOptions{
		Roots:       roots,
		CurrentTime: now,
		DNSName:     host,
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return fmt.Errorf("%w: the server certificate is not valid for %s under the pinned CA: %w", ErrPinMismatch, host, err)
	}
	return nil
}

// NewHTTPClient returns an HTTP client using cfg (from ClientTLSConfig) with timeouts fit
// for API calls between members.
func NewHTTPClient(cfg *tls.Config) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			TLSClientConfig:     cfg,
			TLSHandshakeTimeout: 10 * time.Second,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     90 * time.Second,
		},
	}
}
