package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/client"
)

// RequestJoin is the joining node's first step: it tries each address of tok in turn,
// pinning the cluster CA (and checking the address's name) before sending anything, and
// asks for its credentials with req (whose Name and Secret come from tok, CSR from the
// node's new key). It moves to the next address only when one cannot be reached or fails
// the pin; an answer from a genuine member (such as "token expired") ends the attempt. It
// returns the answer and the address that gave it.
func RequestJoin(ctx context.Context, tok Token, req api.JoinRequest) (api.JoinResponse, string, error) {
	var resp api.JoinResponse
	addr, err := eachAddress(ctx, tok.Fingerprint, tok.Addresses, nil, func(c *client.Client) error {
		return c.Query(ctx, http.MethodPost, "cluster/join", req, &resp)
	})
	return resp, addr, err
}

// CompleteJoinWith is the joining node's last step, once its k3s agent has joined: it
// registers with the member at addr (pinning the CA fingerprint pin), presenting its
// member certificate. It is safe to repeat after a lost answer.
func CompleteJoinWith(ctx context.Context, pin, addr string, cert tls.Certificate, req api.JoinRequest) (api.Member, error) {
	var m api.Member
	_, err := eachAddress(ctx, pin, []string{addr}, &cert, func(c *client.Client) error {
		return c.Query(ctx, http.MethodPost, "cluster/join/complete", req, &m)
	})
	return m, err
}

// eachAddress runs call against each address until one answers.
func eachAddress(ctx context.Context, pin string, addrs []string, cert *tls.Certificate, call func(*client.Client) error) (string, error) {
	var failures []string
	var errs []error
	for _, addr := range addrs {
		err := callAddress(pin, addr, cert, call)
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

func callAddress(pin, addr string, cert *tls.Certificate, call func(*client.Client) error) error {
	cfg, err := ClientTLSConfigFor(pin, addr, cert)
	if err != nil {
		return err
	}
	hc := NewHTTPClient(cfg)
	defer hc.CloseIdleConnections()
	return call(client.New("https://"+addr, hc))
}

// addressesError reports every address's failure and matches each (errors.Is).
type addressesError struct {
	msg  string
	errs []error
}

func (e *addressesError) Error() string   { return e.msg }
func (e *addressesError) Unwrap() []error { return e.errs }
