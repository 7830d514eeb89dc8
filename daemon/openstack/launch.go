package openstack

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/osdcloud/osd/bootstrap/images/guest"
	"github.com/osdcloud/osd/daemon/api"
)

// LaunchResult says what was launched and how to reach it.
type LaunchResult = api.LaunchResult

// HostProbe is how Launch checks reachability from the host (real
// implementations in HostNetwork; tests may substitute).
type HostProbe interface {
	Ping(ctx context.Context, ip string) error  // one echo request, 500 ms timeout
	Route(ctx context.Context, ip string) error // nil when the host has a route to ip
	// SSH logs in to ip as user with key, accepting only hostKey, and runs command.
	SSH(ctx context.Context, ip, user string, key ssh.Signer, hostKey ssh.PublicKey, command string) (string, error)
}

// Launcher launches test servers.
type Launcher struct {
	Client *Client
	Probe  HostProbe
	// KeyFile is the private key of DefaultKeyName (KeyFile(stateDir)) and KnownHosts the
	// file where the test guests' host keys are recorded: with both, Launch logs in to a
	// server of the test image over SSH and says the ssh command that does it.
	KeyFile, KnownHosts string
	// ActiveTimeout and PingTimeout bound the waits (defaults 5 min and 3 min: TCG is slow).
	ActiveTimeout, PingTimeout time.Duration
	// Poll is the pause between status checks (default 500 ms), and four times the least
	// time from one ping to the next.
	Poll time.Duration
	// MetadataTimeout bounds the wait, once the server answers ping, for the guest's
	// report of the metadata service on its console (default 90 s), and SSHTimeout the
	// wait for the first SSH login after that (default 2 min).
	MetadataTimeout, SSHTimeout time.Duration
}

func (l Launcher) poll() time.Duration {
	if l.Poll == 0 {
		return 500 * time.Millisecond
	}
	return l.Poll
}

// pingPoll is the least time from one ping to the next: a quarter of poll (a ping waits
// half a second for its answer, so an unanswered one is followed by the next at once).
func (l Launcher) pingPoll() time.Duration { return l.poll() / 4 }

// Launch creates the server tg describes (Resolve made it), waits until it is ACTIVE,
// gives it a floating IP from the external network and waits until the host can ping
// it; for the test image it then logs in over SSH with osd's key. When the server is not
// reachable, the result's Diagnosis says why from what can be observed (and the error
// says it too).
func (l Launcher) Launch(ctx context.Context, tg LaunchTarget, emit func(string)) (LaunchResult, error) {
	c := l.Client
	req, fl, img, tenant := tg.Request, tg.Flavor, tg.Image, tg.Network
	res := LaunchResult{Name: req.Name, Key: req.Key}
	start := time.Now()
	srv, err := c.CreateServer(ctx, ServerRequest{Name: req.Name, ImageID: img.ID, FlavorID: fl.ID, NetworkID: tenant.ID, KeyName: req.Key, BootVolumeGB: req.VolumeGB})
	if err != nil {
		return res, fmt.Errorf("create server %s: %w", req.Name, err)
	}
	res.ID, res.Status = srv.ID, "BUILD"
	boot := ""
	if req.VolumeGB > 0 {
		boot = fmt.Sprintf(", booting from a new %d GiB volume", req.VolumeGB)
	}
	emit(fmt.Sprintf("server %s (%s): created with %s, image %s, network %s, keypair %s%s", req.Name, srv.ID, fl.Name, img.Name, tenant.Name, req.Key, boot))
	if req.NoWait {
		res.Reach = "osd launch returned at once (--no-wait): openstack server show " + srv.ID
		return res, nil
	}

	// The floating IP is made while Nova builds the server, once Neutron has bound the
	// port Nova made: Neutron takes seconds for it (most of them spent by neutron-server
	// on CPU that the guest's boot needs next), which after ACTIVE would come before the
	// first ping. Made before the binding, it delayed Nova's binding request in the same
	// neutron-server (4.3 s against 1.9 s), and with it the whole build.
	active, failed := make(chan struct{}), make(chan struct{})
	attached := make(chan attachResult, 1)
	go func() { attached <- l.attachFloatingIP(ctx, req.Name, srv.ID, tenant, active, failed) }()

	srv, err = l.waitActive(ctx, srv.ID, emit)
	res.Status, res.Host = srv.Status, srv.Host
	if err != nil {
		close(failed)
		l.dropFloatingIP(ctx, <-attached)
		return res, err
	}
	activeAt := time.Now()
	res.ActiveIn = activeAt.Sub(start).Round(100 * time.Millisecond).String()
	emit(fmt.Sprintf("server %s: ACTIVE on %s after %s", req.Name, srv.Host, res.ActiveIn))
	close(active)
	at := <-attached
	port := at.port
	for _, ip := range port.FixedIPs {
		if !strings.Contains(ip.IPAddress, ":") {
			res.FixedIP = ip.IPAddress
		}
	}
	if at.err != nil {
		return res, at.err
	}
	res.FloatingIP = at.fip.FloatingIPAddress
	emit(fmt.Sprintf("server %s: fixed IP %s, floating IP %s; waiting for it to answer ping", req.Name, res.FixedIP, res.FloatingIP))
	// The console's URL is asked for once the server answers (or not): not before the
	// first ping, which it would delay by an API call.
	consoleURL := func() {
		if u, err := c.ConsoleURL(ctx, srv.ID); err == nil {
			res.ConsoleURL = u
		}
	}

	pingTimeout := l.PingTimeout
	if pingTimeout == 0 {
		pingTimeout = 3 * time.Minute
	}
	deadline := time.Now().Add(pingTimeout)
	for {
		sent := time.Now()
		if err := l.Probe.Ping(ctx, res.FloatingIP); err == nil {
			pingAt := time.Now()
			res.Reachable = true
			res.PingIn = pingAt.Sub(start).Round(100 * time.Millisecond).String()
			emit(fmt.Sprintf("server %s: %s answers ping (%s after create)", req.Name, res.FloatingIP, res.PingIn))
			consoleURL()
			con := l.guestReport(ctx, srv.ID)
			res.Metadata = metadataReport(con, srv.ID, l.metadataTimeout())
			emit(fmt.Sprintf("server %s: metadata service: %s", req.Name, res.Metadata))
			events, _ := c.CreateEvents(ctx, srv.ID) // admin only: without them the profile has less
			res.Profile = LaunchProfile(ProfileInput{Created: start, Active: activeAt, Pinged: pingAt, Events: events, Console: con})
			l.reachBySSH(ctx, &res, tg, con, start, emit)
			return res, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(l.pingPoll() - time.Since(sent)):
		}
	}
	consoleURL()
	res.Diagnosis = l.diagnose(context.WithoutCancel(ctx), srv.ID, port.ID, res.FloatingIP)
	return res, fmt.Errorf("server %s (%s) does not answer ping on %s after %s: %s", req.Name, srv.ID, res.FloatingIP, pingTimeout, strings.Join(res.Diagnosis, "; "))
}

func (l Launcher) waitActive(ctx context.Context, id string, emit func(string)) (Server, error) {
	timeout := l.ActiveTimeout
	if timeout == 0 {
		timeout = 5 * time.Minute
	}
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		srv, err := l.Client.GetServer(ctx, id)
		if err != nil {
			return srv, fmt.Errorf("server %s: %w", id, err)
		}
		state := srv.Status + "/" + srv.TaskState
		if state != last {
			emit(fmt.Sprintf("server %s: %s (task %s)", srv.Name, srv.Status, orNone(srv.TaskState)))
			last = state
		}
		switch srv.Status {
		case "ACTIVE":
			return srv, nil
		case "ERROR":
			msg := "no fault recorded"
			if srv.Fault != nil {
				msg = srv.Fault.Message
				if srv.Fault.Details != "" && !strings.Contains(srv.Fault.Details, "Traceback") {
					msg += " (" + firstLine(srv.Fault.Details) + ")"
				}
			}
			return srv, fmt.Errorf("server %s went to ERROR: %s", srv.Name, msg)
		}
		if time.Now().After(deadline) {
			return srv, fmt.Errorf("server %s still %s (task %s) after %s", srv.Name, srv.Status, orNone(srv.TaskState), timeout)
		}
		select {
		case <-ctx.Done():
			return srv, ctx.Err()
		case <-time.After(l.poll()):
		}
	}
}

// externalNetwork is the network named "external", else the first router:external one.
func (l Launcher) externalNetwork(ctx context.Context) (Network, error) {
	nets, err := l.Client.ListNetworks(ctx, "")
	if err != nil {
		return Network{}, fmt.Errorf("list networks: %w", err)
	}
	var first Network
	for _, n := range nets {
		if !n.External {
			continue
		}
		if n.Name == ExternalNetworkName {
			return n, nil
		}
		if first.ID == "" {
			first = n
		}
	}
	if first.ID == "" {
		return first, errors.New("no external network for floating IPs (osd init's day-one step makes \"external\")")
	}
	return first, nil
}

// attachResult is what attachFloatingIP found or made.
type attachResult struct {
	port Port       // the server's port, on the tenant network when it has one there
	fip  FloatingIP // the port's floating IP
	made bool       // fip was made here (not the port's already)
	err  error      // says which server (by name) and what failed
}

// attachFloatingIP waits until Nova has made a port of server id and Neutron has bound it
// (polling Neutron), then gives that port a floating IP from the external network, unless
// it has one. A port whose binding failed gets it once the server is ACTIVE. Closing
// active says the server is ACTIVE: a port missing after that is an error. Closing failed
// says the server will not come up: it returns then, without starting another request
// (a floating IP being made is waited for, so that the caller can delete it).
func (l Launcher) attachFloatingIP(ctx context.Context, name, id string, tenant Network, active, failed <-chan struct{}) attachResult {
	var r attachResult
	ext, err := l.externalNetwork(ctx)
	if err != nil {
		r.err = err
		return r
	}
	for {
		last := false
		select {
		case <-failed:
			r.err = errors.New("the server did not come up")
			return r
		case <-active:
			last = true
		default:
		}
		ports, err := l.Client.ListPorts(ctx, map[string]string{"device_id": id})
		if err != nil {
			r.err = fmt.Errorf("ports of %s: %w", name, err)
			return r
		}
		r.port = Port{}
		for _, p := range ports {
			if p.NetworkID == tenant.ID || r.port.ID == "" {
				r.port = p
			}
		}
		if r.port.ID != "" && len(r.port.FixedIPs) > 0 && (portBound(r.port) || last) {
			r.fip, r.made, err = l.floatingIP(ctx, ext.ID, r.port.ID)
			switch {
			case err == nil:
			case strings.Contains(err.Error(), "ExternalGatewayForFloatingIPNotFound"):
				r.err = fmt.Errorf("floating IP for %s: no router connects network %s to the external network %s (day-one's osd-router does it for osd-net): %w", name, tenant.Name, ext.Name, err)
			default:
				r.err = fmt.Errorf("floating IP for %s: %w", name, err)
			}
			return r
		}
		if last {
			r.err = fmt.Errorf("server %s is ACTIVE but has no port", name)
			return r
		}
		select {
		case <-ctx.Done():
			r.err = ctx.Err()
			return r
		case <-failed:
		case <-active:
		case <-time.After(l.poll()):
		}
	}
}

// portBound says whether Neutron has answered Nova's binding of port p. A caller that
// cannot see the binding (binding:vif_type is for admins) has no reason to wait.
func portBound(p Port) bool {
	return p.VIFType != "unbound" && p.VIFType != "binding_failed"
}

// dropFloatingIP deletes the floating IP attachFloatingIP made for a server that did not
// come up (Nova deletes the port it made; the address would stay allocated).
func (l Launcher) dropFloatingIP(ctx context.Context, r attachResult) {
	if !r.made {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	_ = l.Client.DeleteFloatingIP(ctx, r.fip.ID)
}

// floatingIP returns the port's floating IP, allocating one if it has none (made).
func (l Launcher) floatingIP(ctx context.Context, extID, portID string) (FloatingIP, bool, error) {
	have, err := l.Client.ListFloatingIPs(ctx, map[string]string{"port_id": portID})
	if err != nil {
		return FloatingIP{}, false, err
	}
	if len(have) > 0 {
		return have[0], false, nil
	}
	fip, err := l.Client.CreateFloatingIP(ctx, extID, portID)
	return fip, err == nil, err
}

func (l Launcher) metadataTimeout() time.Duration {
	if l.MetadataTimeout == 0 {
		return 90 * time.Second
	}
	return l.MetadataTimeout
}

// guestReport waits for the guest's report of the metadata service on its console (the
// test image reads its uuid, hostname and SSH keys from http://169.254.169.254 once it
// has a lease) and, from the test image, for its SSH server's host key (printed as the
// server starts, which on a loaded host may come after the metadata report), and
// returns what the console says by then.
func (l Launcher) guestReport(ctx context.Context, id string) guest.Console {
	deadline := time.Now().Add(l.metadataTimeout())
	var con guest.Console
	for {
		if out, err := l.Client.ConsoleOutput(ctx, id, 0); err == nil {
			con = guest.ParseConsole(out)
			if _, ok := MetadataFinding(con, id); ok && (!con.Started || con.SSHHostKey != "") {
				return con
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return con
		}
		select {
		case <-ctx.Done():
		case <-time.After(l.poll()):
		}
	}
}

// metadataReport says what the guest found at the metadata service.
func metadataReport(con guest.Console, id string, waited time.Duration) string {
	if msg, ok := MetadataFinding(con, id); ok {
		return msg
	}
	return "the guest has not reported on it after " + waited.String() + " (an image other than osd-test says nothing)"
}

// MetadataFinding says what a guest's console reports of the metadata service for
// server id, and whether it reports anything yet (pure).
func MetadataFinding(c guest.Console, id string) (string, bool) {
	switch {
	case c.MetadataUUID == id:
		return "the guest read its own uuid from http://169.254.169.254", true
	case c.MetadataUUID != "":
		return "the metadata service gave the guest uuid " + c.MetadataUUID + ", not this server's (" + id + ")", true
	case c.MetadataFail:
		return "the guest got no answer from http://169.254.169.254 for a minute (the OVN metadata agent and its haproxy in the network's ovnmeta namespace on the compute node, then Nova's metadata API)", true
	}
	return "", false
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
