package netsetup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/osdcloud/osd/netsetup/ovsdb"
	"github.com/vishvananda/netlink"
)

func normalize(spec Spec) (Spec, error) {
	n, err := spec.External.Normalize()
	if err != nil {
		return spec, err
	}
	spec.External = n
	if spec.Datapath == "" {
		spec.Datapath = DetectDatapath()
	}
	return spec, nil
}

// EnsureExternalNetwork brings the external bridge and network of spec into being on
// the host h (OVS must be running: EnsureOVS). Re-running it on a converged host
// changes nothing and reports changed=false. If a step fails, what this call did is
// undone and the error says which step failed; in interface mode that includes a
// failed connectivity probe, after which the NIC has its old addresses and routes.
func EnsureExternalNetwork(ctx context.Context, h Host, spec Spec) (changed bool, err error) {
	applied, err := ApplyExternalNetwork(ctx, h, spec)
	return len(applied) > 0, err
}

// ApplyExternalNetwork is EnsureExternalNetwork returning what it changed: the
// operations it applied, in order (none on a converged host).
func ApplyExternalNetwork(ctx context.Context, h Host, spec Spec) ([]Op, error) {
	spec, err := normalize(spec)
	if err != nil {
		return nil, err
	}
	return ensureBridgeNetwork(ctx, h, spec, "external network")
}

// ensureBridgeNetwork observes, plans and applies spec (normalized); what names it in
// errors. It returns the operations it applied.
func ensureBridgeNetwork(ctx context.Context, h Host, spec Spec, what string) ([]Op, error) {
	o, err := ovsdb.Connect(ctx, h.OVSSocket)
	if err != nil {
		return nil, err
	}
	defer o.Close()
	st, err := Observe(ctx, h, o, spec)
	if err != nil {
		return nil, err
	}
	ops := Plan(st, spec)
	if len(ops) == 0 {
		return nil, nil
	}
	e, err := NewExecutor(h, o)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	rev, err := e.Apply(ctx, ops)
	if err != nil {
		return nil, fmt.Errorf("%s on %s: %w", what, spec.External.Bridge, err)
	}
	rev.Success()
	return ops, nil
}

// Teardown undoes EnsureExternalNetwork for osd reset: it puts addresses and routes
// moved off an external interface back (from h.Saved), deletes the bridge, deletes
// osd's nftables table and restores ip_forward if osd changed it (also from h.Saved;
// without it ip_forward is left as it is). It does as much
// as it can and returns every error met.
func Teardown(ctx context.Context, h Host, spec Spec) error {
	spec, err := normalize(spec)
	if err != nil {
		return err
	}
	saved, err := h.loadState()
	if err != nil {
		return err
	}
	nl, err := netlinkHandle(h.NetNS)
	if err != nil {
		return err
	}
	defer nl.Close()
	o, err := ovsdb.Connect(ctx, h.OVSSocket)
	if err != nil {
		return err
	}
	defer o.Close()

	var errs []error
	if saved.Moved == nil && spec.External.Interface != "" {
		// Nothing recorded (no Saved): give the NIC whatever the bridge carries now.
		m, err := currentBridgeConfig(nl, spec.External)
		if err != nil {
			errs = append(errs, err)
		}
		saved.Moved = m
	}
	if m := saved.Moved; m != nil {
		nic, err := nl.LinkByName(m.Interface)
		br, _ := nl.LinkByName(m.Bridge)
		if err != nil {
			errs = append(errs, fmt.Errorf("restore %s: %w", m.Interface, err))
		} else if err := restoreIPConfig(nl, nic, br, *m); err != nil {
			errs = append(errs, err)
		} else {
			saved.Moved = nil
		}
	}
	if spec.External.Interface != "" {
		if _, err := o.DeletePort(ctx, spec.External.Bridge, spec.External.Interface); err != nil {
			errs = append(errs, err)
		}
	}
	if changed, err := o.DeleteBridge(ctx, spec.External.Bridge); err != nil {
		errs = append(errs, err)
	} else if changed {
		slog.Info("netsetup: deleted OVS bridge " + spec.External.Bridge)
	}
	if err := waitLink(ctx, nl, spec.External.Bridge, false); err != nil {
		errs = append(errs, err)
	}
	if _, err := deleteNAT(h.NetNS); err != nil {
		errs = append(errs, err)
	}
	if v := saved.IPForwardOriginal; v != "" {
		if err := writeIPForward(h.NetNS, v); err != nil {
			errs = append(errs, err)
		} else {
			saved.IPForwardOriginal = ""
		}
	}
	if err := h.updateState(func(s *Saved) { *s = saved }); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// currentBridgeConfig returns the bridge's IPv4 addresses and routes as a MovedConfig
// back to the interface, or nil if the bridge has none or does not exist.
func currentBridgeConfig(nl *netlink.Handle, n ExternalNetwork) (*MovedConfig, error) {
	br, err := nl.LinkByName(n.Bridge)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("link %s: %w", n.Bridge, err)
	}
	addrs, err := linkAddrs(nl, br)
	if err != nil {
		return nil, err
	}
	routes, err := linkRoutes(nl, br)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 && len(routes) == 0 {
		return nil, nil
	}
	m := &MovedConfig{Interface: n.Interface, Bridge: n.Bridge}
	for _, a := range addrs {
		sa := toSavedAddr(a)
		sa.Label = n.Interface
		m.Addrs = append(m.Addrs, sa)
	}
	for _, r := range routes {
		m.Routes = append(m.Routes, toRoute(r))
	}
	return m, nil
}

// linkExists reports whether link name exists in nl's namespace.
func linkExists(nl *netlink.Handle, name string) (bool, error) {
	_, err := nl.LinkByName(name)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return false, nil
	}
	return err == nil, err
}
