package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/osdcloud/osd/daemon/rest"
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

// Authorizer returns the rest authorizer of the HTTPS API: actions that allow untrusted
// callers pass; others need a client certificate (else 401) that is valid now and whose
// fingerprint trusted accepts (else 403). Members are trusted through the fingerprint of
// their member certificate, so removing a member revokes its access even though the
// cluster CA signed its certificate.
func Authorizer(trusted func(fingerprint string) bool) rest.Authorizer {
	return func(r *http.Request, untrustedAllowed bool) error {
		if untrustedAllowed {
			return nil
		}
		if r.TLS == nil {
			return rest.Errorf(rest.ErrUnauthorized, "the remote API requires TLS with a client certificate")
		}
		if len(r.TLS.PeerCertificates) == 0 {
			return rest.Errorf(rest.ErrUnauthorized, "a client certificate is required: trust yours on a member with `osd trust add CERT` and present it")
		}
		return checkClientCert(r.TLS.PeerCertificates[0], trusted, time.Now())
	}
}

// checkClientCert is the trust decision for one verified-possession client certificate.
func checkClientCert(cert *x509.Certificate, trusted func(string) bool, now time.Time) error {
	fp := Fingerprint(cert)
	if now.Before(cert.NotBefore) || now.After(cert.NotAfter) {
		return rest.Errorf(rest.ErrForbidden, "client certificate %s is not valid now (valid %s to %s)",
			fp, cert.NotBefore.Format(time.RFC3339), cert.NotAfter.Format(time.RFC3339))
	}
	if !trusted(fp) {
		return rest.Errorf(rest.ErrForbidden, "client certificate %s is not trusted: add it on a member with `osd trust add CERT`", fp)
	}
	return nil
}

// ErrPinMismatch is returned (wrapped) when a server does not present the pinned CA.
var ErrPinMismatch = errors.New("server certificate does not match the pinned cluster fingerprint")

// ClientTLSConfig is the configuration for talking to a member: the server must present
// a chain holding the CA certificate whose fingerprint is pin (64 hex digits), and its
// leaf must be signed by that CA for server use. System roots play no part. The check runs
// inside the handshake, before the client sends its certificate or any request.
// clientCert, if not nil, is presented when the server asks.
func ClientTLSConfig(pin string, clientCert *tls.Certificate) (*tls.Config, error) {
	if err := ValidateFingerprint(pin); err != nil {
		return nil, fmt.Errorf("pinned cluster %w", err)
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{"http/1.1"},
		// Verification is ours (VerifyConnection): pinned CA, no system roots, no names.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyPinned(cs.PeerCertificates, pin, time.Now())
		},
	}
	if clientCert != nil {
		cert := *clientCert
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	}
	return cfg, nil
}

// verifyPinned checks a presented chain against the pinned CA fingerprint.
func verifyPinned(chain []*x509.Certificate, pin string, now time.Time) error {
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
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return fmt.Errorf("%w: the server certificate is not valid under the pinned CA: %w", ErrPinMismatch, err)
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
