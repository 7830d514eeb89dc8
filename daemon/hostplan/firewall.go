package hostplan

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"

	"github.com/osdcloud/osd/daemon/deploy"
	"github.com/osdcloud/osd/daemon/state"
	"github.com/osdcloud/osd/netsetup"
)

// firewall is the firewall step: osd's host firewall (netsetup.EnsureFirewall) for this
// host's zones, before Kubernetes starts; the kernel keeps it while the daemon is down.
func firewall(ctx context.Context, st *state.State) (bool, string, error) {
	peersMu.Lock() // the peers and control sources it reads are not changing under it
	defer peersMu.Unlock()
	spec, err := FirewallSpec(ctx, st)
	if err != nil {
		return false, "", err
	}
	changed, err := netsetup.EnsureFirewall("", spec)
	if err == nil {
		err = st.Set(ctx, state.KeyFirewall, "true")
	}
	detail := fmt.Sprintf("table inet %s: guests from %v reach ports %v here; %d trusted member address(es), %d control source(s)",
		netsetup.FilterTable, spec.GuestNets, spec.PublicTCP, len(spec.Members), len(spec.ControlSources))
	return changed, detail, err
}

// FirewallSpec is this host's firewall: guests from the isolated external network (a NIC
// moved into br-ex carries the LAN's own addresses: its guests are then judged as the
// LAN), the pod and service CIDRs and the members trusted, the catalog's NodePorts public.
func FirewallSpec(ctx context.Context, st *state.State) (netsetup.FirewallSpec, error) {
	ext, err := External(ctx, st)
	if err != nil {
		return netsetup.FirewallSpec{}, err
	}
	var guests []string
	if ext.Interface == "" {
		guests = []string{ext.CIDR}
	}
	members, err := FirewallMembers(ctx, st)
	if err != nil {
		return netsetup.FirewallSpec{}, err
	}
	control, err := storedList(ctx, st, state.KeyFirewallControl)
	if err != nil {
		return netsetup.FirewallSpec{}, err
	}
	joined, err := storedList(ctx, st, state.KeyFirewallControlPeers)
	if err != nil {
		return netsetup.FirewallSpec{}, err
	}
	control = append(control, HostAddresses(joined)...)
	k := st.Cfg.K3s()
	return netsetup.FirewallSpec{
		GuestNets: guests, PodCIDR: k.ClusterCIDR, ServiceCIDR: k.ServiceCIDR, Members: members,
		PublicTCP:      PublicPorts(deploy.DefaultCatalog()),
		InternalTCP:    append(netsetup.DefaultInternalTCP(), netsetup.Ports(uint16(k.APIPort))...),
		InternalUDP:    netsetup.DefaultInternalUDP(),
		ControlOnlyTCP: netsetup.DefaultControlOnlyTCP(),
		ControlSources: ControlSources(HostAddresses([]string{st.Cfg.PublicIP()}), control),
	}, nil
}

// ControlSources are the sources the firewall lets reach the control-only ports (pure):
// this host's addresses (its own traffic to itself; on a compute node nothing of the
// control plane listens) and the control nodes' addresses and pod CIDRs (fromNodes, what
// the cluster's Nodes labelled with the control role last said), sorted, unique, without
// what is neither an IP address nor a CIDR.
func ControlSources(self, fromNodes []string) []string {
	var out []string
	for _, a := range append(slices.Clone(self), fromNodes...) {
		if p, err := netip.ParsePrefix(a); err == nil {
			out = append(out, p.Masked().String())
		} else if ip, err := netip.ParseAddr(a); err == nil && ip.Zone() == "" {
			out = append(out, ip.Unmap().String())
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// UpdateFirewallControl records the control nodes' addresses and pod CIDRs (sources, from
// the cluster's Nodes) and, when they changed and the firewall step ran, brings the
// firewall to them (one transaction: the table is replaced whole).
func UpdateFirewallControl(ctx context.Context, st *state.State, sources []string) error {
	peersMu.Lock()
	defer peersMu.Unlock()
	sources = ControlSources(nil, sources)
	have, err := storedList(ctx, st, state.KeyFirewallControl)
	if err != nil {
		return err
	}
	if slices.Equal(have, sources) {
		return nil
	}
	b, _ := json.Marshal(sources)
	if err := st.Set(ctx, state.KeyFirewallControl, string(b)); err != nil {
		return err
	}
	applied, err := firewallApplied(ctx, st)
	if err != nil || !applied {
		return err
	}
	spec, err := FirewallSpec(ctx, st)
	if err != nil {
		return err
	}
	if _, err := netsetup.EnsureFirewall("", spec); err != nil {
		return fmt.Errorf("firewall control sources: %w", err)
	}
	slog.Info("firewall: control sources updated", "sources", spec.ControlSources)
	return nil
}

// RecordControlPeers records, on a joining node, the addresses of the cluster it joins
// (IP or IP:port) as control sources (state.KeyFirewallControlPeers); the firewall step
// that follows puts them in place.
func RecordControlPeers(ctx context.Context, st *state.State, addrs []string) error {
	peersMu.Lock()
	defer peersMu.Unlock()
	b, _ := json.Marshal(HostAddresses(addrs))
	return st.Set(ctx, state.KeyFirewallControlPeers, string(b))
}

// storedList is the JSON list of strings under key (nil when unset).
func storedList(ctx context.Context, st *state.State, key state.Key) ([]string, error) {
	v, ok, err := st.Get(ctx, key)
	if err != nil || !ok {
		return nil, err
	}
	var out []string
	if err := json.Unmarshal([]byte(v), &out); err != nil {
		return nil, fmt.Errorf("stored %s: %w", key, err)
	}
	return out, nil
}

// PublicPorts are the NodePorts of every service of c, sorted (pure): the public endpoints.
func PublicPorts(c deploy.Catalog) []uint16 {
	var out []uint16
	for _, s := range c.Services {
		for _, p := range s.Ports {
			if p.NodePort > 0 && p.NodePort < 65536 {
				out = append(out, uint16(p.NodePort))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// FirewallMembers are the addresses the firewall trusts: this host's, the members' in
// the store, the recorded peers (state.KeyFirewallPeers).
func FirewallMembers(ctx context.Context, st *state.State) ([]string, error) {
	out := HostAddresses([]string{st.Cfg.PublicIP()})
	ms, err := st.DB.ListMembers(ctx)
	if err != nil {
		return nil, fmt.Errorf("members for the firewall: %w", err)
	}
	for _, m := range ms {
		out = append(out, HostAddresses([]string{m.Address})...)
	}
	peers, err := firewallPeers(ctx, st)
	if err != nil {
		return nil, err
	}
	out = append(out, peers...)
	slices.Sort(out)
	return slices.Compact(out), nil
}

// HostAddresses are the IP addresses of addrs ("IP" or "IP:port"), without loopback and
// without what is not an IP address (pure).
func HostAddresses(addrs []string) []string {
	var out []string
	for _, a := range addrs {
		if h, _, err := net.SplitHostPort(a); err == nil {
			a = h
		}
		ip, err := netip.ParseAddr(a)
		if err != nil || ip.Zone() != "" || ip.IsLoopback() || ip.IsUnspecified() {
			continue
		}
		out = append(out, ip.Unmap().String())
	}
	return out
}

var peersMu sync.Mutex

func firewallPeers(ctx context.Context, st *state.State) ([]string, error) {
	peers, err := storedList(ctx, st, state.KeyFirewallPeers)
	return HostAddresses(peers), err
}

// UpdateFirewallPeers records addresses (IP or IP:port) the firewall trusts (add) or no
// longer trusts (remove), or replaces them all (replace, when not nil), and brings the
// firewall's members' sets in place to FirewallMembers. Before this daemon's firewall
// step ran (a joiner before its plan, a test's daemon) it only records them.
func UpdateFirewallPeers(ctx context.Context, st *state.State, replace, add, remove []string) error {
	peersMu.Lock()
	defer peersMu.Unlock()
	applied, err := firewallApplied(ctx, st)
	if err != nil {
		return err
	}
	peers, err := firewallPeers(ctx, st)
	if err != nil {
		return err
	}
	if replace != nil {
		peers = HostAddresses(replace)
	}
	gone := HostAddresses(remove)
	peers = slices.DeleteFunc(append(peers, HostAddresses(add)...), func(a string) bool { return slices.Contains(gone, a) })
	slices.Sort(peers)
	peers = slices.Compact(peers)
	b, _ := json.Marshal(peers)
	if err := st.Set(ctx, state.KeyFirewallPeers, string(b)); err != nil {
		return err
	}
	if !applied {
		return nil // the firewall step makes the table with these peers
	}
	spec, err := FirewallSpec(ctx, st)
	if err != nil {
		return err
	}
	members := slices.DeleteFunc(netsetup.TrustedMembers(spec), func(a string) bool { return slices.Contains(gone, a) })
	changed, err := netsetup.SetFirewallMembers("", members)
	if err != nil {
		return fmt.Errorf("firewall members: %w", err)
	}
	if changed {
		slog.Info("firewall: trusted members updated", "members", members)
	}
	return nil
}

// firewallApplied says whether this daemon's firewall step put the host firewall in place.
func firewallApplied(ctx context.Context, st *state.State) (bool, error) {
	v, _, err := st.Get(ctx, state.KeyFirewall)
	return v == "true", err
}
