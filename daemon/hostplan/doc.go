// Package hostplan is the host preparation that `osd init` (daemon/converge) and `osd join`
// (daemon/join) share: the preflight prelude (what preflight probes, the kernel settings
// recorded before osd changes them, the tunnel interface asked for checked), the
// idempotent host steps (osd's host firewall, KVM permissions, Open vSwitch, the external
// network, the tunnel endpoint, libvirt, the volume group) and the firewall's trusted
// peers and control sources kept up to date while the daemon runs; where each step keeps
// what osd reset undoes (ExternalHost, TunnelHost, VGSpec); and a step event as a
// progress line.
package hostplan
