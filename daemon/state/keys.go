package state

import (
	"context"

	"github.com/osdcloud/osd/daemon/store"
)

// Key is a key of the state store's configuration table. Every key the daemon uses is
// declared here, once. What osd init and osd join asked for, and what the steps decided
// from it, is not here but in the host record (State.Host, store.Host).
type Key string

// The daemon's configuration keys.
const (
	// KeyVirtType is the hypervisor type the last preflight chose (kvm or qemu).
	KeyVirtType Key = "hypervisor.virt_type"
	// KeySysctls are the kernel settings before k3s first changed them (JSON), for reset.
	KeySysctls Key = "host.original_sysctls"
	// KeyOVSOwner and KeyLibvirtOwner say who started those host services ("osd" or
	// "host"): osd reset stops only what osd started.
	KeyOVSOwner     Key = "host.ovs_owner"
	KeyLibvirtOwner Key = "host.libvirt_owner"
	// KeyFirewallPeers are the addresses the host firewall trusts beside this host's and
	// the members' in the store (JSON list): on the cluster, nodes whose join it accepted;
	// on a joined node, the cluster's members as it last heard of them.
	KeyFirewallPeers Key = "host.firewall_peers"
	// KeyFirewall is "true" once this daemon's firewall step put the host firewall in
	// place: only then do changes of the peers touch the kernel (a test's daemon, which
	// never ran the step, leaves the host's firewall alone).
	KeyFirewall Key = "host.firewall"
	// KeyFirewallControl are the control nodes' addresses and pod CIDRs as last read from
	// the cluster's Nodes (JSON list): the only sources the firewall lets reach the
	// control-only ports, besides this host's addresses.
	KeyFirewallControl Key = "host.firewall_control"
	// KeyFirewallControlPeers are, on a joined node, the addresses of the cluster it
	// joined (the first node's, a control node: JSON list), control sources too: the
	// control node's traffic to this node may come from them (pods' traffic leaving
	// their node is masqueraded to the address it leaves from).
	KeyFirewallControlPeers Key = "host.firewall_control_peers"
)

// Values of store.Host.Goal.
const (
	GoalOpenStack  = "openstack"
	GoalKubernetes = "kubernetes"
)

// Values of store.Join.State.
const (
	JoinJoining = "joining"
	JoinMember  = "member"
	JoinRemoved = "removed"
)

// Owners of host services (KeyOVSOwner, KeyLibvirtOwner).
const (
	OwnerOSD  = "osd"
	OwnerHost = "host"
)

// Get reads key from db: its value and whether it is set.
func Get(ctx context.Context, db *store.DB, key Key) (string, bool, error) {
	return db.GetConfig(ctx, string(key))
}

// Set writes key to db.
func Set(ctx context.Context, db *store.DB, key Key, value string) error {
	return db.SetConfig(ctx, string(key), value)
}

// RecordOwner remembers, the first time only, whether osd started a host service.
func RecordOwner(ctx context.Context, db *store.DB, key Key, started bool) error {
	if _, ok, err := Get(ctx, db, key); err != nil || ok {
		return err
	}
	owner := OwnerHost
	if started {
		owner = OwnerOSD
	}
	return Set(ctx, db, key, owner)
}
