package openstack

import (
	"context"
	"net/url"
)

// Network is a Neutron network.
type Network struct {
	ID              string   `json:"id"`
	Name            string   `json:"name"`
	Status          string   `json:"status"`
	External        bool     `json:"router:external"`
	Shared          bool     `json:"shared"`
	NetworkType     string   `json:"provider:network_type,omitempty"`
	PhysicalNetwork string   `json:"provider:physical_network,omitempty"`
	Subnets         []string `json:"subnets"`
	MTU             int      `json:"mtu"`
}

// Subnet is a Neutron subnet.
type Subnet struct {
	ID              string           `json:"id"`
	Name            string           `json:"name"`
	NetworkID       string           `json:"network_id"`
	CIDR            string           `json:"cidr"`
	GatewayIP       string           `json:"gateway_ip"`
	EnableDHCP      bool             `json:"enable_dhcp"`
	AllocationPools []AllocationPool `json:"allocation_pools"`
	IPVersion       int              `json:"ip_version"`
}

// AllocationPool is a range of addresses Neutron hands out.
type AllocationPool struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

// Router is a Neutron router.
type Router struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Status  string `json:"status"`
	Gateway *struct {
		NetworkID        string `json:"network_id"`
		ExternalFixedIPs []struct {
			SubnetID  string `json:"subnet_id"`
			IPAddress string `json:"ip_address"`
		} `json:"external_fixed_ips"`
	} `json:"external_gateway_info"`
}

// Port is a Neutron port.
type Port struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	NetworkID   string    `json:"network_id"`
	DeviceID    string    `json:"device_id"`
	DeviceOwner string    `json:"device_owner"`
	Status      string    `json:"status"`
	MAC         string    `json:"mac_address"`
	FixedIPs    []FixedIP `json:"fixed_ips"`
	VIFType     string    `json:"binding:vif_type"`
	HostID      string    `json:"binding:host_id"`
}

// FixedIP is an address of a port.
type FixedIP struct {
	SubnetID  string `json:"subnet_id"`
	IPAddress string `json:"ip_address"`
}

// SecurityGroup is a Neutron security group with its rules.
type SecurityGroup struct {
	ID        string              `json:"id"`
	Name      string              `json:"name"`
	ProjectID string              `json:"project_id"`
	Rules     []SecurityGroupRule `json:"security_group_rules"`
}

// SecurityGroupRule is one rule; empty fields mean any.
type SecurityGroupRule struct {
	ID              string `json:"id,omitempty"`
	SecurityGroupID string `json:"security_group_id"`
	Direction       string `json:"direction"` // ingress, egress
	EtherType       string `json:"ethertype"` // IPv4, IPv6
	Protocol        string `json:"protocol,omitempty"`
	PortMin         *int   `json:"port_range_min,omitempty"`
	PortMax         *int   `json:"port_range_max,omitempty"`
	RemoteIPPrefix  string `json:"remote_ip_prefix,omitempty"`
	RemoteGroupID   string `json:"remote_group_id,omitempty"`
}

// FloatingIP is a Neutron floating IP.
type FloatingIP struct {
	ID                string `json:"id"`
	FloatingIPAddress string `json:"floating_ip_address"`
	FixedIPAddress    string `json:"fixed_ip_address"`
	PortID            string `json:"port_id"`
	FloatingNetworkID string `json:"floating_network_id"`
	RouterID          string `json:"router_id"`
	Status            string `json:"status"`
}

func filter(kv ...string) url.Values {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	return q
}

// ListNetworks lists networks (named name when not empty).
func (c *Client) ListNetworks(ctx context.Context, name string) ([]Network, error) {
	var out struct {
		Networks []Network `json:"networks"`
	}
	err := c.do(ctx, "GET", network, "networks", filter("name", name), nil, &out)
	return out.Networks, err
}

// CreateNetwork creates a network from n's name, external, shared and provider fields.
func (c *Client) CreateNetwork(ctx context.Context, n Network) (Network, error) {
	body := map[string]any{"name": n.Name, "admin_state_up": true, "shared": n.Shared}
	if n.External {
		body["router:external"] = true
	}
	if n.NetworkType != "" {
		body["provider:network_type"] = n.NetworkType
	}
	if n.PhysicalNetwork != "" {
		body["provider:physical_network"] = n.PhysicalNetwork
	}
	var out struct {
		Network Network `json:"network"`
	}
	err := c.do(ctx, "POST", network, "networks", nil, map[string]any{"network": body}, &out)
	return out.Network, err
}

// ListSubnets lists subnets (named name when not empty).
func (c *Client) ListSubnets(ctx context.Context, name string) ([]Subnet, error) {
	var out struct {
		Subnets []Subnet `json:"subnets"`
	}
	err := c.do(ctx, "GET", network, "subnets", filter("name", name), nil, &out)
	return out.Subnets, err
}

// CreateSubnet creates an IPv4 subnet.
func (c *Client) CreateSubnet(ctx context.Context, s Subnet) (Subnet, error) {
	body := map[string]any{"name": s.Name, "network_id": s.NetworkID, "cidr": s.CIDR, "ip_version": 4, "enable_dhcp": s.EnableDHCP}
	if s.GatewayIP != "" {
		body["gateway_ip"] = s.GatewayIP
	}
	if len(s.AllocationPools) > 0 {
		body["allocation_pools"] = s.AllocationPools
	}
	var out struct {
		Subnet Subnet `json:"subnet"`
	}
	err := c.do(ctx, "POST", network, "subnets", nil, map[string]any{"subnet": body}, &out)
	return out.Subnet, err
}

// ListRouters lists routers (named name when not empty).
func (c *Client) ListRouters(ctx context.Context, name string) ([]Router, error) {
	var out struct {
		Routers []Router `json:"routers"`
	}
	err := c.do(ctx, "GET", network, "routers", filter("name", name), nil, &out)
	return out.Routers, err
}

// CreateRouter creates a router, with its gateway on externalNetworkID when not empty.
func (c *Client) CreateRouter(ctx context.Context, name, externalNetworkID string) (Router, error) {
	body := map[string]any{"name": name, "admin_state_up": true}
	if externalNetworkID != "" {
		body["external_gateway_info"] = map[string]any{"network_id": externalNetworkID}
	}
	var out struct {
		Router Router `json:"router"`
	}
	err := c.do(ctx, "POST", network, "routers", nil, map[string]any{"router": body}, &out)
	return out.Router, err
}

// SetRouterGateway sets a router's external gateway network.
func (c *Client) SetRouterGateway(ctx context.Context, routerID, externalNetworkID string) (Router, error) {
	var out struct {
		Router Router `json:"router"`
	}
	body := map[string]any{"router": map[string]any{"external_gateway_info": map[string]any{"network_id": externalNetworkID}}}
	err := c.do(ctx, "PUT", network, "routers/"+url.PathEscape(routerID), nil, body, &out)
	return out.Router, err
}

// AddRouterInterface attaches a subnet to a router.
func (c *Client) AddRouterInterface(ctx context.Context, routerID, subnetID string) error {
	return c.do(ctx, "PUT", network, "routers/"+url.PathEscape(routerID)+"/add_router_interface", nil, map[string]any{"subnet_id": subnetID}, nil)
}

// ListPorts lists ports matching the non-empty filters (device_id, network_id, device_owner, ...).
func (c *Client) ListPorts(ctx context.Context, filters map[string]string) ([]Port, error) {
	q := url.Values{}
	for k, v := range filters {
		if v != "" {
			q.Set(k, v)
		}
	}
	var out struct {
		Ports []Port `json:"ports"`
	}
	err := c.do(ctx, "GET", network, "ports", q, nil, &out)
	return out.Ports, err
}

// ListSecurityGroups lists security groups named name of a project.
func (c *Client) ListSecurityGroups(ctx context.Context, name, projectID string) ([]SecurityGroup, error) {
	var out struct {
		SecurityGroups []SecurityGroup `json:"security_groups"`
	}
	err := c.do(ctx, "GET", network, "security-groups", filter("name", name, "project_id", projectID), nil, &out)
	return out.SecurityGroups, err
}

// CreateSecurityGroupRule adds a rule to a security group.
func (c *Client) CreateSecurityGroupRule(ctx context.Context, r SecurityGroupRule) (SecurityGroupRule, error) {
	var out struct {
		Rule SecurityGroupRule `json:"security_group_rule"`
	}
	err := c.do(ctx, "POST", network, "security-group-rules", nil, map[string]any{"security_group_rule": r}, &out)
	return out.Rule, err
}

// ListFloatingIPs lists floating IPs matching the non-empty filters (port_id, floating_network_id, ...).
func (c *Client) ListFloatingIPs(ctx context.Context, filters map[string]string) ([]FloatingIP, error) {
	q := url.Values{}
	for k, v := range filters {
		if v != "" {
			q.Set(k, v)
		}
	}
	var out struct {
		FloatingIPs []FloatingIP `json:"floatingips"`
	}
	err := c.do(ctx, "GET", network, "floatingips", q, nil, &out)
	return out.FloatingIPs, err
}

// CreateFloatingIP allocates a floating IP on an external network, bound to portID when not empty.
func (c *Client) CreateFloatingIP(ctx context.Context, externalNetworkID, portID string) (FloatingIP, error) {
	body := map[string]any{"floating_network_id": externalNetworkID}
	if portID != "" {
		body["port_id"] = portID
	}
	var out struct {
		FloatingIP FloatingIP `json:"floatingip"`
	}
	err := c.do(ctx, "POST", network, "floatingips", nil, map[string]any{"floatingip": body}, &out)
	return out.FloatingIP, err
}

// AssociateFloatingIP binds a floating IP to a port.
func (c *Client) AssociateFloatingIP(ctx context.Context, id, portID string) (FloatingIP, error) {
	var out struct {
		FloatingIP FloatingIP `json:"floatingip"`
	}
	err := c.do(ctx, "PUT", network, "floatingips/"+url.PathEscape(id), nil, map[string]any{"floatingip": map[string]any{"port_id": portID}}, &out)
	return out.FloatingIP, err
}

// DeleteFloatingIP releases a floating IP (a missing one is not an error).
func (c *Client) DeleteFloatingIP(ctx context.Context, id string) error {
	err := c.do(ctx, "DELETE", network, "floatingips/"+url.PathEscape(id), nil, nil, nil)
	if IsNotFound(err) {
		return nil
	}
	return err
}
