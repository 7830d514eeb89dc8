package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/osdcloud/osd/daemon/client"
)

// RequestJoin is the joining node's first step: it tries each address of tok in turn,
// pinning the cluster CA before sending anything, and asks for its credentials with
// req (whose Name and Secret should come from tok). It moves to the next address only
// when one cannot be reached or fails the pin; an answer from a genuine member (such as
// "token expired") ends the attempt. It returns the answer and the address that gave it.
func RequestJoin(ctx context.Context, tok Token, req JoinRequest) (JoinResponse, string, error) {
	var resp JoinResponse
	addr, err := eachAddress(ctx, tok, nil, func(c *client.Client) error {
		return c.Query(ctx, http.MethodPost, "cluster/join", req, &resp)
	})
	return resp, addr, err
}

// CompleteJoin is the joining node's last step, once its k3s agent has joined: it
// registers with the member at addr, presenting the member certificate from RequestJoin.
// It is safe to repeat after a lost answer.
func CompleteJoin(ctx context.Context, tok Token, addr string, creds JoinResponse, req JoinRequest) (Member, error) {
	pair, err := tls.X509KeyPair([]byte(creds.MemberCertPEM), []byte(creds.MemberKeyPEM))
	if err != nil {
		return Member{}, fmt.Errorf("load member certificate: %w", err)
	}
	return CompleteJoinWith(ctx, tok, addr, pair, req)
}

// CompleteJoinWith is CompleteJoin with the member certificate already loaded (as
// LoadMemberIdentity returns it).
func CompleteJoinWith(ctx context.Context, tok Token, addr string, cert tls.Certificate, req JoinRequest) (Member, error) {
	var m Member
	one := tok
	one.Addresses = []string{addr}
	_, err := eachAddress(ctx, one, &cert, func(c *client.Client) error {
		return c.Query(ctx, http.MethodPost, "cluster/join/complete", req, &m)
	})
	return m, err
}

// eachAddress runs call against each address until one answers.
func eachAddress(ctx context.Context, tok Token, cert *tls.Certificate, call func(*client.Client) error) (string, error) {
	cfg, err := ClientTLSConfig(tok.Fingerprint, cert)
	if err != nil {
		return "", err
	}
	hc := NewHTTPClient(cfg)
	defer hc.CloseIdleConnections()
	var failures []string
	var errs []error
	for _, addr := range tok.Addresses {
		err := call(client.New("https://"+addr, hc))
		var apiErr *client.Error
		switch {
		case err == nil:
			return addr, nil
		case errors.As(err, &apiErr), ctx.Err() != nil:
			return addr, err
		}
		failures = append(failures, fmt.Sprintf("%s: %v", addr, err))
		errs = append(errs, err)
	}
	return "", &addressesError{
		msg:  "no cluster address in the join token answered: " + strings.Join(failures, "; "),
		errs: errs,
	}
}

// addressesError reports every address's failure and matches each (errors.Is).
type addressesError struct {
	msg  string
	errs []error
}

func (e *addressesError) Error() string   { return e.msg }
func (e *addressesError) Unwrap() []error { return e.errs }
