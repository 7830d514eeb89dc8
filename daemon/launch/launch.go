// Package launch is the daemon's instances resource: GET /1.0/instances lists the servers
// of every project, POST /1.0/instances boots a test server as an operation and says how
// to reach it, or why it cannot be reached.
package launch

import (
	"context"
	"errors"
	"net/http"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/openstack"
	"github.com/osdcloud/osd/daemon/rest"
	"github.com/osdcloud/osd/daemon/state"
)

// Service is the instances resource of one daemon.
type Service struct {
	st *state.State
	// login logs in as admin (deployment.Service's CloudClient).
	login func(ctx context.Context) (*openstack.Client, error)
}

// New returns the instances resource of st, logging in with login (deployment.Service's
// CloudClient).
func New(st *state.State, login func(ctx context.Context) (*openstack.Client, error)) *Service {
	return &Service{st: st, login: login}
}

// Endpoints are the instances routes.
func (s *Service) Endpoints() []rest.Endpoint {
	return []rest.Endpoint{{Path: "instances", Get: rest.Action{Handler: s.getInstances}, Post: rest.Action{Handler: s.postInstances}}}
}

// client logs in and checks that the cloud can launch servers.
func (s *Service) client(ctx context.Context) (*openstack.Client, error) {
	c, err := s.login(ctx)
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
// unreachable: then its diagnosis says why). Every field is checked, and the flavor, image,
// network and keypair looked up, before the operation starts: what is wrong or missing is
// answered 400.
func (s *Service) postInstances(r *http.Request) rest.Response {
	var wire api.LaunchRequest
	if err := rest.DecodeJSON(r, &wire, 16<<10); err != nil {
		return rest.ErrorResponse(err)
	}
	req := openstack.LaunchDefaults(wire)
	if err := openstack.ValidateLaunch(req); err != nil {
		return rest.ErrorResponse(rest.Errorf(rest.ErrBadRequest, "%v", err))
	}
	c, err := s.client(r.Context())
	if err != nil {
		return rest.ErrorResponse(err)
	}
	l := openstack.Launcher{Client: c, Probe: openstack.HostNetwork{},
		KeyFile: openstack.KeyFile(s.st.Cfg.StateDir), KnownHosts: openstack.KnownHostsFile(s.st.Cfg.StateDir)}
	target, err := l.Resolve(r.Context(), req)
	if errors.Is(err, openstack.ErrBadLaunch) {
		return rest.ErrorResponse(rest.Errorf(rest.ErrBadRequest, "%v", err))
	} else if err != nil {
		return rest.ErrorResponse(rest.Errorf(rest.ErrNotReady, "%v", err))
	}
	op, _ := s.st.Ops.Start("launch", false, func(ctx context.Context, emit func(string)) (any, error) {
		return l.Launch(ctx, target, emit)
	})
	return rest.AsyncResponse(rest.APIPrefix+"/operations/"+op.ID, op)
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
func instance(s openstack.Server) api.Instance {
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
