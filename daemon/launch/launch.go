// Package launch is the daemon's instances resource: GET /1.0/instances lists the servers
// of every project, POST /1.0/instances boots a test server as an operation and says how
// to reach it, or why it cannot be reached.
package launch

import (
	"context"
	"net/http"
	"regexp"

	"github.com/osdcloud/osd/bootstrap/cloud"
	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/rest"
	"github.com/osdcloud/osd/daemon/state"
)

// validServerName is what osd launch accepts as a server name.
var validServerName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// Service is the instances resource of one daemon.
type Service struct {
	st *state.State
	// Cloud logs in as admin (deployment.Service.CloudClient).
	Cloud func(ctx context.Context) (*cloud.Client, error)
}

// New returns the instances resource of st, logging in with login.
func New(st *state.State, login func(ctx context.Context) (*cloud.Client, error)) *Service {
	return &Service{st: st, Cloud: login}
}

// Endpoints are the instances routes.
func (s *Service) Endpoints() []rest.Endpoint {
	return []rest.Endpoint{{Path: "instances", Get: rest.Action{Handler: s.getInstances}, Post: rest.Action{Handler: s.postInstances}}}
}

// client logs in and checks that the cloud can launch servers.
func (s *Service) client(ctx context.Context) (*cloud.Client, error) {
	c, err := s.Cloud(ctx)
	if err != nil {
		return nil, err
	}
	for _, svc := range []string{"compute", "network", "image"} {
		if _, err := c.Endpoint(svc); err != nil {
			return nil, rest.Errorf(rest.ErrNotReady, "%v: the cloud cannot launch servers yet (osd status shows the deployment)", err)
		}
	}
	return c, nil
}

// postInstances launches a test server as an operation: POST /1.0/instances with a
// LaunchRequest; the operation's result is a LaunchResult (also when the server is
// unreachable: then its diagnosis says why).
func (s *Service) postInstances(r *http.Request) rest.Response {
	var wire api.LaunchRequest
	if err := rest.DecodeJSON(r, &wire, 16<<10); err != nil {
		return rest.ErrorResponse(err)
	}
	if wire.Name != "" && !validServerName.MatchString(wire.Name) {
		return rest.ErrorResponse(rest.Errorf(rest.ErrBadRequest, "server name %q: want letters, digits, '.', '_' or '-' (at most 63)", wire.Name))
	}
	c, err := s.client(r.Context())
	if err != nil {
		return rest.ErrorResponse(err)
	}
	req := cloud.LaunchRequest{Name: wire.Name, Flavor: wire.Flavor, Image: wire.Image, Network: wire.Network, NoWait: wire.NoWait}.WithDefaults()
	op, _ := s.st.Ops.Start("launch", false, func(ctx context.Context, emit func(string)) (any, error) {
		l := cloud.Launcher{Client: c, Probe: cloud.HostNetwork{}}
		res, err := l.Launch(ctx, req, emit)
		return WireResult(res), err
	})
	return rest.AsyncResponse(rest.APIPrefix+"/operations/"+op.ID, op)
}

// WireResult is a launch result as the API shows it (pure).
func WireResult(r cloud.LaunchResult) api.LaunchResult {
	return api.LaunchResult{Name: r.Name, ID: r.ID, Status: r.Status, Host: r.Host, FixedIP: r.FixedIP, FloatingIP: r.FloatingIP,
		Reachable: r.Reachable, Reach: r.Reach, ConsoleURL: r.ConsoleURL, Diagnosis: r.Diagnosis, ActiveIn: r.ActiveIn,
		PingIn: r.PingIn, Metadata: r.Metadata}
}

// getInstances lists the servers of every project with their addresses.
func (s *Service) getInstances(r *http.Request) rest.Response {
	c, err := s.client(r.Context())
	if err != nil {
		return rest.ErrorResponse(err)
	}
	servers, err := c.ListServers(r.Context(), true)
	if err != nil {
		return rest.ErrorResponse(err)
	}
	out := []api.Instance{}
	for _, sv := range servers {
		out = append(out, instance(sv))
	}
	return rest.SyncResponse(out)
}

// instance is one server as the API lists it (pure).
func instance(s cloud.Server) api.Instance {
	in := api.Instance{Name: s.Name, ID: s.ID, Status: s.Status}
	if s.Fault != nil {
		in.Fault = s.Fault.Message
	}
	for _, addrs := range s.Addresses {
		for _, a := range addrs {
			switch {
			case a.Type == "floating":
				in.FloatingIP = a.Addr
			case a.Version == 4 && in.FixedIP == "":
				in.FixedIP = a.Addr
			}
		}
	}
	return in
}
