package daemon

import (
	"context"
	"net/http"
	"regexp"

	"github.com/osdcloud/osd/bootstrap/cloud"
	"github.com/osdcloud/osd/daemon/rest"
)

// validServerName is what osd launch accepts as a server name.
var validServerName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// cloudClient logs in as admin, or says clearly why osd init has not got that far.
func (d *Daemon) cloudClient(ctx context.Context) (*cloud.Client, error) {
	creds, err := d.adminCredentials()
	if err != nil {
		st := d.conv.snapshot()
		if st.State == "running" {
			step := ""
			if n := len(st.Steps); n > 0 {
				step = " (step " + st.Steps[n-1].Step + ")"
			}
			return nil, rest.Errorf(rest.ErrNotReady, "osd init is still running%s: wait until it finishes (osd status)", step)
		}
		return nil, rest.Errorf(rest.ErrNotReady, "osd init has not finished on this host (%v): run osd init", err)
	}
	c, err := cloud.Authenticate(ctx, creds)
	if err != nil {
		return nil, rest.Errorf(rest.ErrNotReady, "log in to Keystone: %v", err)
	}
	for _, svc := range []string{"compute", "network", "image"} {
		if _, err := c.Endpoint(svc); err != nil {
			return nil, rest.Errorf(rest.ErrNotReady, "%v: the cloud cannot launch servers yet (osd status shows the deployment)", err)
		}
	}
	return c, nil
}

// postInstances launches a test server as an operation: POST /1.0/instances with a
// cloud.LaunchRequest; the operation's result is a cloud.LaunchResult (also when the
// server is unreachable: then its diagnosis says why).
func (d *Daemon) postInstances(r *http.Request) rest.Response {
	var req cloud.LaunchRequest
	if err := rest.DecodeJSON(r, &req, 16<<10); err != nil {
		return rest.ErrorResponse(err)
	}
	if req.Name != "" && !validServerName.MatchString(req.Name) {
		return rest.ErrorResponse(rest.Errorf(rest.ErrBadRequest, "server name %q: want letters, digits, '.', '_' or '-' (at most 63)", req.Name))
	}
	c, err := d.cloudClient(r.Context())
	if err != nil {
		return rest.ErrorResponse(err)
	}
	req = req.WithDefaults()
	op := d.ops.start(d.runCtx, &d.wg, "launch", func(ctx context.Context, emit func(string)) (any, error) {
		l := cloud.Launcher{Client: c, Probe: cloud.HostNetwork{}}
		return l.Launch(ctx, req, emit)
	})
	return rest.AsyncResponse("/1.0/operations/"+op.ID, op)
}

// Instance is one server as GET /1.0/instances lists it.
type Instance struct {
	Name       string `json:"name"`
	ID         string `json:"id"`
	Status     string `json:"status"`
	FixedIP    string `json:"fixed_ip,omitempty"`
	FloatingIP string `json:"floating_ip,omitempty"`
	Fault      string `json:"fault,omitempty"`
}

// getInstances lists the servers of every project with their addresses.
func (d *Daemon) getInstances(r *http.Request) rest.Response {
	c, err := d.cloudClient(r.Context())
	if err != nil {
		return rest.ErrorResponse(err)
	}
	servers, err := c.ListServers(r.Context(), true)
	if err != nil {
		return rest.ErrorResponse(err)
	}
	out := []Instance{}
	for _, s := range servers {
		in := Instance{Name: s.Name, ID: s.ID, Status: s.Status}
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
		out = append(out, in)
	}
	return rest.SyncResponse(out)
}
