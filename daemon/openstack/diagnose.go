package openstack

import (
	"context"

	"github.com/osdcloud/osd/bootstrap/images/guest"
)

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
