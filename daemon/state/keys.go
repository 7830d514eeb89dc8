package state

import (
	"context"

	"github.com/osdcloud/osd/daemon/store"
)

// Key is a key of the state store's configuration table. Every key the daemon uses is
// declared here, once.
type Key string

// The daemon's configuration keys.
const (
	// KeyInitialized marks a host on which osd init was asked for: from then on the
	// daemon converges the host at every start.
	KeyInitialized Key = "init.requested"
	// KeyGoal is how far converge goes: GoalOpenStack (default) or GoalKubernetes.
	KeyGoal Key = "init.goal"
	// KeyExternalWanted is the external network osd init asked for (JSON).
	KeyExternalWanted Key = "init.external_network"
	// KeyVirtType is the hypervisor type the last preflight chose (kvm or qemu).
	KeyVirtType Key = "hypervisor.virt_type"
	// KeySysctls are the kernel settings before k3s first changed them (JSON), for reset.
	KeySysctls Key = "host.original_sysctls"
	// KeyOVSOwner and KeyLibvirtOwner say who started those host services ("osd" or
	// "host"): osd reset stops only what osd started.
	KeyOVSOwner     Key = "host.ovs_owner"
	KeyLibvirtOwner Key = "host.libvirt_owner"
	// KeyExternal is the external network osd made (JSON).
	KeyExternal Key = "host.external_network"
	// KeyTunnelWanted is the tunnel interface osd init or osd join asked for: an interface
	// name, "auto" (the one holding the node's address) or "none"/"" (no tunnel bridge).
	KeyTunnelWanted Key = "host.tunnel_interface"
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
	// KeyJoin is this node's join: JoinJoining, JoinMember or JoinRemoved.
	KeyJoin Key = "join.state"
	// KeyStorageWanted and KeyStorageSizeWanted are what osd init asked for (--storage,
	// --storage-size in bytes); KeyStorageBackend (api.StorageCeph, ...), KeyStorageReason
	// and KeyStorageSize (bytes) what the first converge decided (the size grows when asked).
	KeyStorageWanted     Key = "init.storage_backend"
	KeyStorageSizeWanted Key = "init.storage_size_bytes"
	KeyStorageBackend    Key = "storage.backend"
	KeyStorageReason     Key = "storage.reason"
	KeyStorageSize       Key = "storage.size_bytes"
)

// Values of KeyGoal.
const (
	GoalOpenStack  = "openstack"
	GoalKubernetes = "kubernetes"
)

// Values of KeyJoin.
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
