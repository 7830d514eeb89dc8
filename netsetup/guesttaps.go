package netsetup

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Guest taps on the userspace datapath.
//
// On the netdev datapath ovs-vswitchd switches promiscuous mode on for every port it adds,
// writing the link's flags from the copy it read when it opened the device (OVS 3.1,
// netdev-linux's update_flags). Libvirt creates a guest's tap and brings it up at once;
// when vswitchd read the flags before the link came up and writes them after, the write
// takes the link down again: promiscuous, not up. The guest then has no network at all (no
// DHCP lease, no metadata, no ping) while Nova shows it ACTIVE. On this project's test
// machine 13 of 40 taps created that way next to a private OVS were left down (2026-11-29;
// TestGuestTapsKeptUp logs how many it saw brought up); the end-to-end tests saw it after a
// power cut and on a compute node.
//
// KeepGuestTapsUp watches the links of OVS's namespace and brings such a tap back up. It
// touches only tap devices that vswitchd has made promiscuous (so they are its ports) and
// that Open vSwitch knows as a Neutron port's interface (external_ids:iface-id, set by
// os-vif and libvirt): nothing else on the host, and no link someone took down on purpose
// before it was a port.

// GuestTapLink is what the keeper decides on: a link as netlink reports it and whether
// Open vSwitch holds it as a Neutron port's interface.
type GuestTapLink struct {
	Kind        string // netlink's link type: "tuntap" for a tap
	Flags       uint32 // raw IFF_* flags
	NeutronPort bool   // an OVS interface with external_ids:iface-id (false until asked)
}

// TapLeftDown reports whether l is a tap vswitchd made promiscuous that is not up. Only
// then is it worth asking Open vSwitch whether it is a Neutron port.
func TapLeftDown(l GuestTapLink) bool {
	return l.Kind == "tuntap" && l.Flags&unix.IFF_PROMISC != 0 && l.Flags&unix.IFF_UP == 0
}

// BringTapUp reports whether the keeper brings l up: a tap left down that Open vSwitch
// holds as a Neutron port's interface.
func BringTapUp(l GuestTapLink) bool {
	return TapLeftDown(l) && l.NeutronPort
}

// tapRescan is how often the keeper lists every link besides the change notifications
// (a notification lost to a full socket buffer is caught by the next listing).
const tapRescan = 30 * time.Second

// KeepGuestTapsUp brings up the guest taps the userspace datapath left down (see above)
// in the namespace of c until ctx ends. fixed, if set, is told each tap it brought up.
func KeepGuestTapsUp(ctx context.Context, c OVSConfig, fixed func(name string)) {
	for ctx.Err() == nil {
		err := keepGuestTapsUp(ctx, c, fixed)
		if ctx.Err() != nil {
			return
		}
		slog.Warn("guest taps: watching links failed, again in 5 s", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
		}
	}
}

func keepGuestTapsUp(ctx context.Context, c OVSConfig, fixed func(string)) error {
	h, err := netlinkHandle(c.NetNS)
	if err != nil {
		return err
	}
	defer h.Close()
	updates := make(chan netlink.LinkUpdate, 256)
	done := make(chan struct{})
	defer close(done)
	failed := make(chan error, 1)
	opts := netlink.LinkSubscribeOptions{ListExisting: true, ErrorCallback: func(err error) {
		select {
		case failed <- err:
		default:
		}
	}}
	if c.NetNS != "" {
		ns, err := netns.GetFromPath(c.NetNS)
		if err != nil {
			return fmt.Errorf("open netns %s: %w", c.NetNS, err)
		}
		defer ns.Close()
		opts.Namespace = &ns
	}
	if err := netlink.LinkSubscribeWithOptions(updates, done, opts); err != nil {
		return fmt.Errorf("subscribe to link changes: %w", err)
	}
	rescan := time.NewTicker(tapRescan)
	defer rescan.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-failed:
			return err
		case u, ok := <-updates:
			if !ok {
				return fmt.Errorf("link notifications ended")
			}
			if u.Header.Type == unix.RTM_NEWLINK {
				fixTap(ctx, h, c, u.Link, fixed)
			}
		case <-rescan.C:
			links, err := h.LinkList()
			if err != nil {
				return fmt.Errorf("list links: %w", err)
			}
			for _, l := range links {
				fixTap(ctx, h, c, l, fixed)
			}
		}
	}
}

// fixTap brings l up if BringTapUp says so, reading its flags again first (the
// notification may be older than the link's state).
func fixTap(ctx context.Context, h *netlink.Handle, c OVSConfig, l netlink.Link, fixed func(string)) {
	if !TapLeftDown(GuestTapLink{Kind: l.Type(), Flags: l.Attrs().RawFlags}) {
		return
	}
	name := l.Attrs().Name
	neutron, err := neutronInterface(ctx, c, name)
	if err != nil {
		slog.Warn("guest taps: cannot tell whether a tap left down is a Neutron port", "tap", name, "err", err)
		return
	}
	now, err := h.LinkByName(name)
	if err != nil {
		return // gone meanwhile
	}
	if !BringTapUp(GuestTapLink{Kind: now.Type(), Flags: now.Attrs().RawFlags, NeutronPort: neutron}) {
		return
	}
	if err := h.LinkSetUp(now); err != nil {
		slog.Warn("guest taps: bringing up a tap the userspace datapath left down failed", "tap", name, "err", err)
		return
	}
	slog.Info("guest taps: brought up a guest's tap the userspace datapath left down", "tap", name)
	if fixed != nil {
		fixed(name)
	}
}

// neutronInterface reports whether Open vSwitch has an interface name with
// external_ids:iface-id (a Neutron port's, as os-vif and libvirt add them).
func neutronInterface(ctx context.Context, c OVSConfig, name string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	o, err := ConnectOVS(ctx, c)
	if err != nil {
		return false, err
	}
	defer o.Close()
	ids, err := o.InterfaceExternalIDs(ctx, name)
	if err != nil {
		return false, err
	}
	return ids["iface-id"] != "", nil
}
