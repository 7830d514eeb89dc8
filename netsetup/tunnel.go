package netsetup

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/osdcloud/osd/netsetup/ovsdb"
	"github.com/vishvananda/netlink"
)

// Geneve between chassis on the userspace (netdev) datapath: ovs-vswitchd encapsulates
// and decapsulates tunnel packets itself ("native tunnelling"), so the tunnel endpoint
// address must be on an OVS bridge of that datapath. To send, it looks up the remote
// endpoint in its copy of the kernel's routes: the route's device must be such a bridge,
// whose own MAC and address become the outer source, and it resolves the next hop's MAC
// by ARP through that bridge (learned from replies, ovs-appctl tnl/neigh/show). To
// receive, a packet must arrive on a port of a bridge of the datapath, addressed to the
// MAC and IP of the bridge's own (LOCAL) interface: then it is decapsulated instead of
// handed to the kernel. So the interface that reaches the other nodes becomes a port of
// TunnelBridge and its addresses and routes move to the bridge (the same move, with the
// same connectivity check and rollback, as an external interface into br-ex). With the
// kernel datapath none of this is needed: the kernel's Geneve port uses the kernel's
// routes and any interface.

// TunnelBridge is the OVS bridge that carries a node's tunnel endpoint on the userspace
// datapath.
const TunnelBridge = "br-phy"

// TunnelPlan is where a node's Geneve endpoint lives (pure decision: PlanTunnel).
type TunnelPlan struct {
	// Interface is moved into TunnelBridge ("" = no bridge).
	Interface string
	// Address is the endpoint's address when it is known without the move ("" = the
	// address Interface carries, read after the move).
	Address string
	// Note says why, in a sentence, for the step's detail.
	Note string
}

// Values of the wanted tunnel interface (osd init/join --tunnel-interface).
const (
	TunnelAuto = "auto" // the interface that holds the node's address
	TunnelNone = "none" // no tunnel bridge
)

// PlanTunnel decides the tunnel endpoint (pure): datapath is the OVS datapath type,
// wanted the interface asked for ("" as TunnelNone, TunnelAuto, or a name), nodeIP the
// node's address and nodeIface the interface holding it now ("" when none does, as after
// it moved into TunnelBridge).
func PlanTunnel(datapath, wanted, nodeIP, nodeIface string) (TunnelPlan, error) {
	if datapath != DatapathNetdev {
		if wanted == "" || wanted == TunnelNone || wanted == TunnelAuto {
			return TunnelPlan{Address: nodeIP, Note: "kernel datapath: the node's address " + nodeIP}, nil
		}
		return TunnelPlan{Note: "kernel datapath: the address of " + wanted}, nil
	}
	switch wanted {
	case "", TunnelNone:
		return TunnelPlan{Address: nodeIP, Note: "userspace datapath without a tunnel bridge: the node's address " + nodeIP +
			" cannot send Geneve to other nodes (give one: --tunnel-interface IF)"}, nil
	case TunnelAuto:
		if nodeIface == "" {
			if nodeIP == "" {
				return TunnelPlan{}, errors.New("the node's address is unknown: start the daemon with --node-ip, or give --tunnel-interface IF")
			}
			// Moved already: the node's address is on the bridge.
			return TunnelPlan{Address: nodeIP, Note: "userspace datapath: the node's address " + nodeIP + " on " + TunnelBridge}, nil
		}
		wanted = nodeIface
	}
	if wanted == TunnelBridge {
		return TunnelPlan{}, fmt.Errorf("tunnel interface %s is the tunnel bridge itself", wanted)
	}
	return TunnelPlan{Interface: wanted, Note: "userspace datapath: " + wanted + " in " + TunnelBridge}, nil
}

// EnsureTunnelBridge makes iface a port of TunnelBridge (netdev) with its IPv4 addresses
// and routes moved to the bridge, rolled back if the host loses connectivity. A re-run on
// a converged host changes nothing.
func EnsureTunnelBridge(ctx context.Context, h Host, iface string) (bool, error) {
	spec := Spec{Datapath: DatapathNetdev, External: ExternalNetwork{Bridge: TunnelBridge, Interface: iface}}
	applied, err := ensureBridgeNetwork(ctx, h, spec, "tunnel bridge")
	return len(applied) > 0, err
}

// RemoveTunnelBridge undoes EnsureTunnelBridge: iface gets its addresses and routes back
// (from h's state file), TunnelBridge goes. It reports whether there was a bridge.
func RemoveTunnelBridge(ctx context.Context, h Host, iface string) (bool, error) {
	o, err := ovsdb.Connect(ctx, h.OVSSocket)
	if err != nil {
		return false, err
	}
	defer o.Close()
	bridges, err := o.Bridges(ctx)
	if err != nil {
		return false, err
	}
	exists := false
	for _, b := range bridges {
		exists = exists || b.Name == TunnelBridge
	}
	if !exists {
		return false, nil
	}
	nl, err := netlinkHandle(h.NetNS)
	if err != nil {
		return false, err
	}
	defer nl.Close()
	saved, err := h.loadState()
	if err != nil {
		return false, err
	}
	var errs []error
	if m := saved.Moved; m != nil {
		nic, err := nl.LinkByName(m.Interface)
		br, _ := nl.LinkByName(m.Bridge)
		if err != nil {
			errs = append(errs, fmt.Errorf("restore %s: %w", m.Interface, err))
		} else if err := restoreIPConfig(nl, nic, br, *m); err != nil {
			errs = append(errs, err)
		} else if err := h.updateState(func(s *Saved) { s.Moved = nil }); err != nil {
			errs = append(errs, err)
		}
	}
	if iface != "" {
		if _, err := o.DeletePort(ctx, TunnelBridge, iface); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := o.DeleteBridge(ctx, TunnelBridge); err != nil {
		errs = append(errs, err)
	}
	if err := waitLink(ctx, nl, TunnelBridge, false); err != nil {
		errs = append(errs, err)
	}
	return true, errors.Join(errs...)
}

// LinkIPv4 is the first global IPv4 address of link name in the namespace at nsPath
// ("" = the caller's), without its prefix.
func LinkIPv4(nsPath, name string) (string, error) {
	nl, err := netlinkHandle(nsPath)
	if err != nil {
		return "", err
	}
	defer nl.Close()
	link, err := nl.LinkByName(name)
	if err != nil {
		return "", fmt.Errorf("link %s: %w", name, err)
	}
	addrs, err := nl.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		return "", fmt.Errorf("addresses of %s: %w", name, err)
	}
	for _, a := range addrs {
		if a.Scope == int(netlink.SCOPE_UNIVERSE) {
			return a.IP.String(), nil
		}
	}
	return "", fmt.Errorf("%s has no IPv4 address", name)
}

// LinkOf is the interface that holds address ip in the namespace at nsPath ("" when
// none does).
func LinkOf(nsPath, ip string) (string, error) {
	want := net.ParseIP(ip)
	if want == nil {
		return "", nil
	}
	nl, err := netlinkHandle(nsPath)
	if err != nil {
		return "", err
	}
	defer nl.Close()
	addrs, err := nl.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return "", fmt.Errorf("list addresses: %w", err)
	}
	for _, a := range addrs {
		if a.IP.Equal(want) {
			link, err := nl.LinkByIndex(a.LinkIndex)
			if err != nil {
				return "", err
			}
			return link.Attrs().Name, nil
		}
	}
	return "", nil
}
