package netsetup

import (
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Kernel-computed address flags that must not be passed back when adding an address.
const addrFlagsComputed = unix.IFA_F_SECONDARY | unix.IFA_F_PERMANENT | unix.IFA_F_TENTATIVE | unix.IFA_F_DADFAILED | unix.IFA_F_DEPRECATED

func toSavedAddr(a netlink.Addr) SavedAddr {
	s := SavedAddr{CIDR: a.IPNet.String(), Label: a.Label, Flags: a.Flags, Scope: a.Scope,
		PreferedLft: a.PreferedLft, ValidLft: a.ValidLft}
	if a.Broadcast != nil {
		s.Broadcast = a.Broadcast.String()
	}
	return s
}

// netlinkAddr rebuilds an address for link label (label "" keeps none).
func (s SavedAddr) netlinkAddr(label string) (*netlink.Addr, error) {
	a, err := netlink.ParseAddr(s.CIDR)
	if err != nil {
		return nil, fmt.Errorf("address %s: %w", s.CIDR, err)
	}
	a.Label = label
	a.Flags = s.Flags &^ addrFlagsComputed
	a.Scope = s.Scope
	a.PreferedLft, a.ValidLft = s.PreferedLft, s.ValidLft
	if s.Broadcast != "" {
		a.Broadcast = net.ParseIP(s.Broadcast).To4()
	}
	return a, nil
}

// moveIPConfig moves the IPv4 addresses and routes of op.Link to op.Bridge, recording
// the originals in the state file first so that a crash can still be undone by Teardown.
func (e *Executor) moveIPConfig(op Op) (func(), error) {
	nic, err := e.nl.LinkByName(op.Link)
	if err != nil {
		return nil, fmt.Errorf("link %s: %w", op.Link, err)
	}
	br, err := e.nl.LinkByName(op.Bridge)
	if err != nil {
		return nil, fmt.Errorf("link %s: %w", op.Bridge, err)
	}
	addrs, err := linkAddrs(e.nl, nic)
	if err != nil {
		return nil, err
	}
	routes, err := linkRoutes(e.nl, nic)
	if err != nil {
		return nil, err
	}
	mc := MovedConfig{Interface: op.Link, Bridge: op.Bridge}
	for _, a := range addrs {
		mc.Addrs = append(mc.Addrs, toSavedAddr(a))
	}
	for _, r := range routes {
		mc.Routes = append(mc.Routes, toRoute(r))
	}
	if err := e.h.updateState(func(s *Saved) { s.Moved = mergeMoved(s.Moved, mc) }); err != nil {
		return nil, err
	}
	undo := func() {
		err := restoreIPConfig(e.nl, nic, br, mc)
		if err == nil {
			err = e.h.updateState(func(s *Saved) { s.Moved = nil })
		}
		e.logUndo(op, err)
	}
	if err := e.shiftIPConfig(nic, br, mc); err != nil {
		undo()
		return nil, err
	}
	return undo, nil
}

// mergeMoved keeps what an earlier, interrupted run recorded (the true originals) and
// adds what is new.
func mergeMoved(old *MovedConfig, cur MovedConfig) *MovedConfig {
	if old == nil || old.Interface != cur.Interface {
		return &cur
	}
	out := *old
	for _, a := range cur.Addrs {
		if !slices.ContainsFunc(out.Addrs, func(b SavedAddr) bool { return b.CIDR == a.CIDR }) {
			out.Addrs = append(out.Addrs, a)
		}
	}
	for _, r := range cur.Routes {
		if !slices.Contains(out.Routes, r) {
			out.Routes = append(out.Routes, r)
		}
	}
	return &out
}

func (e *Executor) shiftIPConfig(nic, br netlink.Link, mc MovedConfig) error {
	for i := len(mc.Routes) - 1; i >= 0; i-- {
		r, err := fromRoute(mc.Routes[i], nic.Attrs().Index)
		if err != nil {
			return err
		}
		if err := e.nl.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("delete route %s from %s: %w", mc.Routes[i], mc.Interface, err)
		}
	}
	for _, s := range mc.Addrs {
		a, err := s.netlinkAddr(s.Label)
		if err != nil {
			return err
		}
		if err := e.nl.AddrDel(nic, a); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			return fmt.Errorf("delete %s from %s: %w", s.CIDR, mc.Interface, err)
		}
	}
	for _, s := range mc.Addrs {
		a, err := s.netlinkAddr("")
		if err != nil {
			return err
		}
		if err := e.nl.AddrAdd(br, a); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("add %s to %s: %w", s.CIDR, mc.Bridge, err)
		}
	}
	for _, rt := range mc.Routes {
		r, err := fromRoute(rt, br.Attrs().Index)
		if err != nil {
			return err
		}
		if err := e.nl.RouteAdd(&r); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("add route %s to %s: %w", rt, mc.Bridge, err)
		}
	}
	return nil
}

// restoreIPConfig puts mc's addresses and routes back on the interface: it removes
// the addresses from the bridge (their routes go with them), then re-adds the
// addresses with their original attributes and the routes in their original order.
func restoreIPConfig(nl *netlink.Handle, nic, br netlink.Link, mc MovedConfig) error {
	var errs []error
	for _, s := range mc.Addrs {
		if br == nil {
			break
		}
		a, err := s.netlinkAddr("")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := nl.AddrDel(br, a); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			errs = append(errs, fmt.Errorf("delete %s from %s: %w", s.CIDR, mc.Bridge, err))
		}
	}
	for _, s := range mc.Addrs {
		a, err := s.netlinkAddr(s.Label)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := nl.AddrAdd(nic, a); err != nil && !errors.Is(err, unix.EEXIST) {
			errs = append(errs, fmt.Errorf("restore %s on %s: %w", s.CIDR, mc.Interface, err))
		}
	}
	for _, rt := range mc.Routes {
		r, err := fromRoute(rt, nic.Attrs().Index)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := nl.RouteAdd(&r); err != nil && !errors.Is(err, unix.EEXIST) {
			errs = append(errs, fmt.Errorf("restore route %s on %s: %w", rt, mc.Interface, err))
		}
	}
	return errors.Join(errs...)
}
