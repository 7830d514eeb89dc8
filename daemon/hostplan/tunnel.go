package hostplan

import (
	"context"
	"fmt"

	"github.com/osdcloud/osd/daemon/state"
	"github.com/osdcloud/osd/daemon/store"
	"github.com/osdcloud/osd/netsetup"
	"github.com/osdcloud/osd/netsetup/ovsdb"
)

// TunnelHost is where the tunnel step keeps what it moved (netsetup's saved state, in
// the host record), so osd reset can put it back.
func TunnelHost(db *store.DB, ovs netsetup.OVSConfig) netsetup.Host {
	return netsetup.Host{OVSSocket: ovs.Socket(), Saved: state.NetSaved(db, state.NetTunnel)}
}

// tunnel is the tunnel step: this node's Geneve endpoint as the last osd init or osd join
// asked for it (netsetup.PlanTunnel). On the userspace datapath the interface it names
// moves into netsetup.TunnelBridge; without one, the bridge goes (the interface gets its
// addresses back). The endpoint's address is recorded in the host's Open vSwitch
// (external_ids:osd-encap-ip, which the ovn-controller pod uses, and ovn-encap-ip, so a
// running ovn-controller moves its chassis' endpoint at once).
func tunnel(ctx context.Context, st *state.State, ovs netsetup.OVSConfig) (bool, string, error) {
	h, err := st.Host(ctx)
	if err != nil {
		return false, "", err
	}
	wanted := h.TunnelInterface
	nodeIP := st.Cfg.PublicIP()
	iface, err := netsetup.LinkOf("", nodeIP)
	if err != nil {
		return false, "", err
	}
	if iface == netsetup.TunnelBridge {
		iface = "" // the node's address moved into the bridge already
	}
	plan, err := netsetup.PlanTunnel(ovs.Datapath, wanted, nodeIP, iface)
	if err != nil {
		return false, "", err
	}
	th := TunnelHost(st.DB, ovs)
	changed := false
	addr := plan.Address
	switch {
	case plan.Interface != "" && ovs.Datapath == netsetup.DatapathNetdev:
		if changed, err = netsetup.EnsureTunnelBridge(ctx, th, plan.Interface); err != nil {
			return false, "", err
		}
		if wanted == netsetup.TunnelAuto {
			// Keep the interface's name: once moved, the address no longer says which it was.
			if err := st.UpdateHost(ctx, func(h *store.Host) error { h.TunnelInterface = plan.Interface; return nil }); err != nil {
				return changed, "", err
			}
		}
		if addr, err = netsetup.LinkIPv4("", netsetup.TunnelBridge); err != nil {
			return changed, "", err
		}
	case plan.Interface != "":
		if addr, err = netsetup.LinkIPv4("", plan.Interface); err != nil {
			return false, "", err
		}
	case wanted != netsetup.TunnelAuto:
		prev, _ := moved(th)
		if changed, err = netsetup.RemoveTunnelBridge(ctx, th, prev); err != nil {
			return changed, "", err
		}
	}
	if addr == "" {
		return changed, "", fmt.Errorf("no tunnel endpoint address: start the daemon with --node-ip, or give --tunnel-interface IF")
	}
	set, err := recordEncap(ctx, ovs, addr)
	return changed || set, "Geneve endpoint " + addr + " (" + plan.Note + ")", err
}

// moved is the interface the tunnel bridge holds (from its saved state; "" when none).
func moved(h netsetup.Host) (string, error) { return h.MovedInterface() }

// recordEncap records addr as this chassis' tunnel endpoint in the host's Open vSwitch.
func recordEncap(ctx context.Context, ovs netsetup.OVSConfig, addr string) (bool, error) {
	o, err := ovsdb.Connect(ctx, ovs.Socket())
	if err != nil {
		return false, err
	}
	defer o.Close()
	return o.SetExternalIDs(ctx, map[string]string{"osd-encap-ip": addr, "ovn-encap-ip": addr})
}
