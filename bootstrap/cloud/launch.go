package cloud

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/osdcloud/osd/bootstrap/images/guest"
)

// LaunchRequest is what osd launch asks for; empty fields take the day-one defaults.
type LaunchRequest struct {
	Name    string `json:"name,omitempty"`    // default osd-test-<random>
	Flavor  string `json:"flavor,omitempty"`  // default m1.tiny
	Image   string `json:"image,omitempty"`   // default osd-test
	Network string `json:"network,omitempty"` // default osd-net
	NoWait  bool   `json:"no_wait,omitempty"` // return once Nova accepted the server
}

// WithDefaults fills the empty fields (a random name from crypto/rand).
func (r LaunchRequest) WithDefaults() LaunchRequest {
	if r.Name == "" {
		b := make([]byte, 3)
		rand.Read(b)
		r.Name = "osd-test-" + hex.EncodeToString(b)
	}
	if r.Flavor == "" {
		r.Flavor = TinyFlavorName
	}
	if r.Image == "" {
		r.Image = MachineImageName
	}
	if r.Network == "" {
		r.Network = TenantNetworkName
	}
	return r
}

// LaunchResult says what was launched and how to reach it.
type LaunchResult struct {
	Name       string   `json:"name"`
	ID         string   `json:"id"`
	Status     string   `json:"status"`
	Host       string   `json:"host,omitempty"`
	FixedIP    string   `json:"fixed_ip,omitempty"`
	FloatingIP string   `json:"floating_ip,omitempty"`
	Reachable  bool     `json:"reachable"`
	Reach      string   `json:"reach,omitempty"`       // how to reach it
	ConsoleURL string   `json:"console_url,omitempty"` // noVNC, when Nova gives one
	Diagnosis  []string `json:"diagnosis,omitempty"`   // why it is not reachable
	ActiveIn   string   `json:"active_in,omitempty"`   // create -> ACTIVE
	PingIn     string   `json:"ping_in,omitempty"`     // create -> first ping answer
	Metadata   string   `json:"metadata,omitempty"`    // what the guest got from the metadata service
}

// HostProbe is how Launch checks reachability from the host (real
// implementations in HostNetwork; tests may substitute).
type HostProbe interface {
	Ping(ctx context.Context, ip string) error  // one echo request, 1 s timeout
	Route(ctx context.Context, ip string) error // nil when the host has a route to ip
}

// Launcher launches test servers.
type Launcher struct {
	Client *Client
	Probe  HostProbe
	// ActiveTimeout and PingTimeout bound the waits (defaults 5 min and 3 min: TCG is slow).
	ActiveTimeout, PingTimeout time.Duration
	// Poll is the pause between status checks and pings (default 2 s).
	Poll time.Duration
	// MetadataTimeout bounds the wait, once the server answers ping, for the guest's
	// report of the metadata service on its console (default 90 s).
	MetadataTimeout time.Duration
}

func (l Launcher) poll() time.Duration {
	if l.Poll == 0 {
		return 2 * time.Second
	}
	return l.Poll
}

// Launch creates the server, waits until it is ACTIVE, gives it a floating
// IP from the external network and waits until the host can ping it. When
// it cannot, the result's Diagnosis says why from what can be observed
// (and the error says it too).
func (l Launcher) Launch(ctx context.Context, req LaunchRequest, emit func(string)) (LaunchResult, error) {
	c := l.Client
	req = req.WithDefaults()
	res := LaunchResult{Name: req.Name}
	flavors, err := c.ListFlavors(ctx)
	if err != nil {
		return res, fmt.Errorf("list flavors: %w", err)
	}
	fl, n := findFlavor(flavors, req.Flavor)
	if n == 0 {
		return res, fmt.Errorf("no flavor %s (osd init's day-one step makes m1.tiny to m1.large)", req.Flavor)
	}
	ims, err := c.ListImages(ctx, req.Image)
	if err != nil {
		return res, fmt.Errorf("list images: %w", err)
	}
	var img Image
	for _, im := range sortedImages(ims) {
		if im.Status == "active" {
			img = im
			break
		}
	}
	if img.ID == "" {
		return res, fmt.Errorf("no active image %s (osd init's day-one step uploads osd-test)", req.Image)
	}
	nets, err := c.ListNetworks(ctx, req.Network)
	if err != nil {
		return res, fmt.Errorf("list networks: %w", err)
	}
	if len(nets) == 0 {
		return res, fmt.Errorf("no network %s (osd init's day-one step makes osd-net)", req.Network)
	}
	tenant := nets[0]

	start := time.Now()
	srv, err := c.CreateServer(ctx, ServerRequest{Name: req.Name, ImageID: img.ID, FlavorID: fl.ID, NetworkID: tenant.ID})
	if err != nil {
		return res, fmt.Errorf("create server %s: %w", req.Name, err)
	}
	res.ID, res.Status = srv.ID, "BUILD"
	emit(fmt.Sprintf("server %s (%s): created with %s, image %s, network %s", req.Name, srv.ID, fl.Name, img.Name, tenant.Name))
	if req.NoWait {
		res.Reach = "osd launch returned at once (--no-wait): openstack server show " + srv.ID
		return res, nil
	}

	srv, err = l.waitActive(ctx, srv.ID, emit)
	res.Status, res.Host = srv.Status, srv.Host
	if err != nil {
		return res, err
	}
	res.ActiveIn = time.Since(start).Round(100 * time.Millisecond).String()
	emit(fmt.Sprintf("server %s: ACTIVE on %s after %s", req.Name, srv.Host, res.ActiveIn))

	ports, err := c.ListPorts(ctx, map[string]string{"device_id": srv.ID})
	if err != nil {
		return res, fmt.Errorf("ports of %s: %w", req.Name, err)
	}
	var port Port
	for _, p := range ports {
		if p.NetworkID == tenant.ID || port.ID == "" {
			port = p
		}
	}
	if port.ID == "" {
		return res, fmt.Errorf("server %s is ACTIVE but has no port", req.Name)
	}
	for _, ip := range port.FixedIPs {
		if !strings.Contains(ip.IPAddress, ":") {
			res.FixedIP = ip.IPAddress
		}
	}
	ext, err := l.externalNetwork(ctx)
	if err != nil {
		return res, err
	}
	fip, err := l.floatingIP(ctx, ext.ID, port.ID)
	if err != nil {
		if strings.Contains(err.Error(), "ExternalGatewayForFloatingIPNotFound") {
			return res, fmt.Errorf("floating IP for %s: no router connects network %s to the external network %s (day-one's osd-router does it for osd-net): %w", req.Name, tenant.Name, ext.Name, err)
		}
		return res, fmt.Errorf("floating IP for %s: %w", req.Name, err)
	}
	res.FloatingIP = fip.FloatingIPAddress
	emit(fmt.Sprintf("server %s: fixed IP %s, floating IP %s; waiting for it to answer ping", req.Name, res.FixedIP, res.FloatingIP))
	if u, err := c.ConsoleURL(ctx, srv.ID); err == nil {
		res.ConsoleURL = u
	}

	pingTimeout := l.PingTimeout
	if pingTimeout == 0 {
		pingTimeout = 3 * time.Minute
	}
	deadline := time.Now().Add(pingTimeout)
	for {
		if err := l.Probe.Ping(ctx, res.FloatingIP); err == nil {
			res.Reachable = true
			res.PingIn = time.Since(start).Round(100 * time.Millisecond).String()
			res.Reach = fmt.Sprintf("ping %s; nc %s 22 (the test guest has no SSH: port 22 answers with a banner, port 80 with HTTP where the security group allows it); console log: openstack console log show %s",
				res.FloatingIP, res.FloatingIP, srv.ID)
			emit(fmt.Sprintf("server %s: %s answers ping (%s after create)", req.Name, res.FloatingIP, res.PingIn))
			res.Metadata = l.metadata(ctx, srv.ID)
			emit(fmt.Sprintf("server %s: metadata service: %s", req.Name, res.Metadata))
			return res, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(l.poll()):
		}
	}
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

// floatingIP returns the port's floating IP, allocating one if it has none.
func (l Launcher) floatingIP(ctx context.Context, extID, portID string) (FloatingIP, error) {
	have, err := l.Client.ListFloatingIPs(ctx, map[string]string{"port_id": portID})
	if err != nil {
		return FloatingIP{}, err
	}
	if len(have) > 0 {
		return have[0], nil
	}
	return l.Client.CreateFloatingIP(ctx, extID, portID)
}

// metadata waits for the guest's report of the metadata service on its console (the test
// image reads its uuid from http://169.254.169.254 once it has a lease) and says what the
// guest found.
func (l Launcher) metadata(ctx context.Context, id string) string {
	timeout := l.MetadataTimeout
	if timeout == 0 {
		timeout = 90 * time.Second
	}
	deadline := time.Now().Add(timeout)
	for {
		if out, err := l.Client.ConsoleOutput(ctx, id, 0); err == nil {
			if msg, ok := MetadataFinding(guest.ParseConsole(out), id); ok {
				return msg
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return "the guest has not reported on it after " + timeout.String() + " (an image other than osd-test says nothing)"
		}
		select {
		case <-ctx.Done():
		case <-time.After(l.poll()):
		}
	}
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

// diagnose gathers what can be observed about an unreachable server.
func (l Launcher) diagnose(ctx context.Context, serverID, portID, fip string) []string {
	c := l.Client
	var f Facts
	if srv, err := c.GetServer(ctx, serverID); err == nil {
		f.ServerStatus = srv.Status
		if srv.Fault != nil {
			f.Fault = srv.Fault.Message
		}
	}
	if ports, err := c.ListPorts(ctx, map[string]string{"device_id": serverID}); err == nil {
		for _, p := range ports {
			if p.ID == portID {
				f.PortStatus, f.VIFType, f.PortHost = p.Status, p.VIFType, p.HostID
				for _, ip := range p.FixedIPs {
					f.PortSubnets = append(f.PortSubnets, ip.SubnetID)
				}
			}
		}
	}
	if out, err := c.ConsoleOutput(ctx, serverID, 0); err == nil {
		f.ConsoleRead = true
		f.Console = guest.ParseConsole(out)
	}
	if rs, err := c.ListRouters(ctx, ""); err == nil {
		for _, r := range rs {
			ports, err := c.ListPorts(ctx, map[string]string{"device_id": r.ID})
			if err != nil {
				continue
			}
			for _, p := range ports {
				for _, ip := range p.FixedIPs {
					if contains(f.PortSubnets, ip.SubnetID) && p.DeviceOwner != "network:router_gateway" {
						f.RouterFound = true
						f.RouterName = r.Name
						f.RouterGateway = r.Gateway != nil && r.Gateway.NetworkID != ""
					}
				}
			}
		}
	}
	if err := l.Probe.Route(ctx, fip); err != nil {
		f.HostRouteError = err.Error()
	}
	return Diagnose(f)
}

// Facts are what can be observed about a server that does not answer ping.
type Facts struct {
	ServerStatus   string
	Fault          string
	PortStatus     string // ACTIVE, DOWN, BUILD
	VIFType        string // binding:vif_type (binding_failed, unbound, ovs, ...)
	PortHost       string
	PortSubnets    []string
	ConsoleRead    bool
	Console        guest.Console
	RouterFound    bool // a router has an interface on the server's subnet
	RouterName     string
	RouterGateway  bool
	HostRouteError string // the host has no route to the floating IP
}

// Diagnose says, most decisive first, why a server does not answer ping (pure).
func Diagnose(f Facts) []string {
	var out []string
	if f.ServerStatus != "" && f.ServerStatus != "ACTIVE" {
		msg := "server is " + f.ServerStatus
		if f.Fault != "" {
			msg += ": " + f.Fault
		}
		out = append(out, msg)
	}
	switch f.VIFType {
	case "binding_failed":
		out = append(out, "port binding failed (binding:vif_type=binding_failed on host "+orNone(f.PortHost)+"): Neutron's OVN driver could not bind the port on that chassis (is ovn-controller running there and its chassis registered with bridge mapping physnet1?)")
	case "unbound":
		out = append(out, "port is not bound to a host (binding:vif_type=unbound)")
	}
	if f.PortStatus != "" && f.PortStatus != "ACTIVE" && f.VIFType != "binding_failed" {
		out = append(out, "port is "+f.PortStatus+" (OVN has not reported the logical port up: is ovn-controller on the compute node connected?)")
	}
	switch {
	case !f.ConsoleRead:
		out = append(out, "console log could not be read")
	case !f.Console.Started:
		out = append(out, "the guest's /init never printed its marker on the console (still booting under TCG, or the kernel/ramdisk did not boot: openstack console log show)")
	case f.Console.NoNIC:
		out = append(out, "the guest has no eth0 (no virtio NIC or its module did not load)")
	case f.Console.Address == "":
		out = append(out, "no DHCP lease in the console log (the guest's udhcpc got no answer: OVN native DHCP for the subnet, the metadata/DHCP port, or the port's flows)")
	}
	if !f.RouterFound {
		out = append(out, "no router has an interface on the server's subnet (floating IPs need one with a gateway on the external network)")
	} else if !f.RouterGateway {
		out = append(out, "router "+f.RouterName+" has no gateway on the external network")
	}
	if f.HostRouteError != "" {
		out = append(out, "no route from the host to the floating IP: "+f.HostRouteError)
	}
	if len(out) == 0 {
		msg := "nothing observable is wrong"
		if f.Console.Address != "" {
			msg += " (the guest has " + f.Console.Address + ")"
		}
		out = append(out, msg+": check the security group allows ICMP, and OVN's NAT for the floating IP (ovn-nbctl lr-nat-list) and the external bridge mapping (physnet1 -> br-ex)")
	}
	return out
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
