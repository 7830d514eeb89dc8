// Package netsetup owns osd's host networking: it runs Open vSwitch (host packages,
// daemons started directly, netdev datapath where the kernel module is absent),
// creates the external bridge br-ex and the external network behind it (by default
// an isolated subnet with the host as gateway and nftables NAT; optionally a host NIC
// moved into br-ex, guarded by a connectivity probe and a rollback), and tears it all
// down again for osd reset.
//
// Decisions are pure: Plan(observed State, desired Spec) returns the []Op that bring
// the host to Spec. An Executor applies ops through OVSDB (libovsdb), netlink and
// nftables netlink (no shelling out except to start the OVS daemons) and records how
// to undo each one in a Reverter.
package netsetup
