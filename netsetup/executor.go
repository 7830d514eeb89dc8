package netsetup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/osdcloud/osd/netsetup/ovsdb"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Executor applies ops to the host through OVSDB, netlink and nftables.
type Executor struct {
	h   Host
	ovs *ovsdb.OVS
	nl  *netlink.Handle
}

// NewExecutor returns an Executor working in h's namespace with the OVS client o.
func NewExecutor(h Host, o *ovsdb.OVS) (*Executor, error) {
	nl, err := netlinkHandle(h.NetNS)
	if err != nil {
		return nil, err
	}
	return &Executor{h: h, ovs: o, nl: nl}, nil
}

// Close releases the netlink handle.
func (e *Executor) Close() { e.nl.Close() }

// Apply runs ops in order. Each op that succeeds adds its undo to the returned
// Reverter; on the first failure Apply undoes what it did, last first, and returns
// the error. The caller calls Success on the Reverter to keep the changes, or Fail to
// undo them.
func (e *Executor) Apply(ctx context.Context, ops []Op) (*Reverter, error) {
	rev := NewReverter()
	for _, op := range ops {
		start := time.Now()
		undo, err := e.apply(ctx, op)
		if err != nil {
			rev.Fail()
			return rev, fmt.Errorf("%s: %w", op, err)
		}
		slog.Info("netsetup: "+op.String(), "took", time.Since(start))
		if undo != nil {
			rev.Add(undo)
		}
	}
	return rev, nil
}

func (e *Executor) apply(ctx context.Context, op Op) (func(), error) {
	switch op.Kind {
	case OpEnsureBridge:
		return e.ensureBridge(ctx, op)
	case OpAddPort:
		changed, err := e.ovs.EnsurePort(ctx, op.Bridge, op.Link, "")
		if err != nil || !changed {
			return nil, err
		}
		return func() { e.logUndo(op, e.deletePort(context.WithoutCancel(ctx), op.Bridge, op.Link)) }, nil
	case OpLinkUp:
		// A bridge's local port comes back asynchronously after vswitchd (re)starts.
		if err := waitLink(ctx, e.nl, op.Link, true); err != nil {
			return nil, err
		}
		link, err := e.nl.LinkByName(op.Link)
		if err != nil {
			return nil, fmt.Errorf("link %s: %w", op.Link, err)
		}
		if link.Attrs().Flags&net.FlagUp != 0 {
			return nil, nil
		}
		if err := e.nl.LinkSetUp(link); err != nil {
			return nil, fmt.Errorf("set %s up: %w", op.Link, err)
		}
		return func() { e.logUndo(op, e.nl.LinkSetDown(link)) }, nil
	case OpAddAddr:
		return e.addAddr(op)
	case OpMoveIPConfig:
		return e.moveIPConfig(op)
	case OpEnableForwarding:
		return e.enableForwarding()
	case OpEnsureNAT:
		existed, err := ensureNAT(e.h.NetNS, ExternalNetwork{Bridge: op.Bridge, CIDR: op.CIDR})
		if err != nil || existed {
			return nil, err
		}
		return func() {
			_, err := deleteNAT(e.h.NetNS)
			e.logUndo(op, err)
		}, nil
	case OpProbe:
		pctx, cancel := context.WithTimeout(ctx, e.h.probeTimeout())
		defer cancel()
		if err := e.h.probe()(pctx, op.Addr); err != nil {
			return nil, fmt.Errorf("connectivity lost, changes rolled back: %w", err)
		}
		return nil, nil
	}
	return nil, fmt.Errorf("unknown op kind %q", op.Kind)
}

func (e *Executor) logUndo(op Op, err error) {
	if err != nil {
		slog.Error("netsetup: undo failed", "op", op.String(), "err", err)
		return
	}
	slog.Info("netsetup: undid " + op.String())
}

func (e *Executor) ensureBridge(ctx context.Context, op Op) (func(), error) {
	bridges, err := e.ovs.Bridges(ctx)
	if err != nil {
		return nil, err
	}
	oldType, existed := "", false
	for _, b := range bridges {
		if b.Name == op.Bridge {
			oldType, existed = b.DatapathType, true
		}
	}
	if _, err := e.ovs.EnsureBridge(ctx, op.Bridge, op.Datapath); err != nil {
		return nil, err
	}
	undo := func() {
		uctx := context.WithoutCancel(ctx)
		if existed {
			_, err := e.ovs.EnsureBridge(uctx, op.Bridge, oldType)
			e.logUndo(op, err)
			return
		}
		e.logUndo(op, e.deleteBridge(uctx, op.Bridge))
	}
	// vswitchd creates the bridge's local port asynchronously, and goes on configuring
	// it after the link appears: the userspace datapath turns promiscuous mode on with
	// the flags it read when it created the tap, which can switch off an "up" set in
	// between. The port is configured once vswitchd records its ofport.
	if err := waitLink(ctx, e.nl, op.Bridge, true); err != nil {
		undo()
		return nil, err
	}
	if err := e.waitAttached(ctx, op.Bridge); err != nil {
		undo()
		return nil, err
	}
	return undo, nil
}

// waitAttached waits up to 10 s for vswitchd to attach interface name (ofport assigned).
func (e *Executor) waitAttached(ctx context.Context, name string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, msg, err := e.ovs.InterfaceReady(ctx, name)
		switch {
		case err != nil:
			return fmt.Errorf("interface %s: %w", name, err)
		case ok:
			return nil
		case time.Now().After(deadline) || ctx.Err() != nil:
			if msg != "" {
				return fmt.Errorf("Open vSwitch did not attach interface %s: %s", name, msg)
			}
			return fmt.Errorf("Open vSwitch did not attach interface %s in 10 s", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *Executor) deleteBridge(ctx context.Context, name string) error {
	if _, err := e.ovs.DeleteBridge(ctx, name); err != nil {
		return err
	}
	return waitLink(ctx, e.nl, name, false)
}

func (e *Executor) deletePort(ctx context.Context, bridge, port string) error {
	_, err := e.ovs.DeletePort(ctx, bridge, port)
	return err
}

// waitLink waits up to 10 s for link name to exist (present) or to be gone.
func waitLink(ctx context.Context, nl *netlink.Handle, name string, present bool) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := nl.LinkByName(name)
		var notFound netlink.LinkNotFoundError
		gone := errors.As(err, &notFound)
		if err != nil && !gone {
			return fmt.Errorf("link %s: %w", name, err)
		}
		if gone != present {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if present {
				return fmt.Errorf("link %s did not appear", name)
			}
			return fmt.Errorf("link %s did not go away", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *Executor) addAddr(op Op) (func(), error) {
	link, err := e.nl.LinkByName(op.Link)
	if err != nil {
		return nil, fmt.Errorf("link %s: %w", op.Link, err)
	}
	addr, err := netlink.ParseAddr(op.Addr)
	if err != nil {
		return nil, fmt.Errorf("address %s: %w", op.Addr, err)
	}
	if err := e.nl.AddrAdd(link, addr); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return nil, nil
		}
		return nil, fmt.Errorf("add %s to %s: %w", op.Addr, op.Link, err)
	}
	return func() { e.logUndo(op, e.nl.AddrDel(link, addr)) }, nil
}

func (e *Executor) enableForwarding() (func(), error) {
	old, err := readIPForward(e.h.NetNS)
	if err != nil {
		return nil, err
	}
	if old == "1" {
		return nil, nil
	}
	if err := e.h.updateState(func(s *Saved) {
		if s.IPForwardOriginal == "" {
			s.IPForwardOriginal = old
		}
	}); err != nil {
		return nil, err
	}
	if err := writeIPForward(e.h.NetNS, "1"); err != nil {
		return nil, err
	}
	return func() {
		err := writeIPForward(e.h.NetNS, old)
		if err == nil {
			err = e.h.updateState(func(s *Saved) { s.IPForwardOriginal = "" })
		}
		e.logUndo(Op{Kind: OpEnableForwarding}, err)
	}, nil
}
