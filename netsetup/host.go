package netsetup

import (
	"context"
	"fmt"
	"time"
)

// Host says where the host network lives and how to change it safely.
type Host struct {
	// NetNS is the path of the network namespace to work in ("" = the caller's).
	// Tests point it at a namespace of their own; osd leaves it empty.
	NetNS string
	// OVSSocket is the ovsdb-server unix socket (OVSConfig.Socket()).
	OVSSocket string
	// Saved keeps what netsetup changed: the original ip_forward value when osd changed
	// it and the addresses and routes moved off an interface, so that Teardown and
	// RemoveTunnelBridge can restore them. nil keeps nothing: they then give the
	// interface what the bridge carries, and leave ip_forward as it is.
	Saved SavedState
	// Probe checks connectivity after a NIC was moved into the bridge; nil pings the
	// old default gateway (PingProbe).
	Probe ProbeFunc
	// ProbeTimeout bounds Probe; 0 means 10 s.
	ProbeTimeout time.Duration
}

// ProbeFunc returns nil when the host still reaches the network. gateway is the
// default gateway of the moved interface ("" if it had none).
type ProbeFunc func(ctx context.Context, gateway string) error

func (h Host) probe() ProbeFunc {
	if h.Probe != nil {
		return h.Probe
	}
	return PingProbe(h.NetNS)
}

func (h Host) probeTimeout() time.Duration {
	if h.ProbeTimeout > 0 {
		return h.ProbeTimeout
	}
	return 10 * time.Second
}

// SavedState is where netsetup keeps what it changed on a host (the caller's store: osd
// keeps it in its state database, for osd reset). Load of a state never saved is the zero
// Saved; Save of the zero Saved forgets it.
type SavedState interface {
	Load() (Saved, error)
	Save(Saved) error
}

// Saved is what netsetup keeps of one part of the host network (its JSON encoding is
// what callers store: keep it compatible).
type Saved struct {
	// IPForwardOriginal is ip_forward before osd set it to 1 ("" = osd did not change it).
	IPForwardOriginal string       `json:"ip_forward_original,omitempty"`
	Moved             *MovedConfig `json:"moved,omitempty"`
}

// Empty says whether s holds nothing to restore.
func (s Saved) Empty() bool { return s.IPForwardOriginal == "" && s.Moved == nil }

// MovedConfig is the IP configuration osd moved from Interface to Bridge.
type MovedConfig struct {
	Interface string      `json:"interface"`
	Bridge    string      `json:"bridge"`
	Addrs     []SavedAddr `json:"addrs"`
	Routes    []Route     `json:"routes"`
}

// SavedAddr is an address osd moved, with what it takes to put it back.
type SavedAddr struct {
	CIDR        string `json:"cidr"`
	Label       string `json:"label,omitempty"`
	Flags       int    `json:"flags,omitempty"`
	Scope       int    `json:"scope,omitempty"`
	Broadcast   string `json:"broadcast,omitempty"`
	PreferedLft int    `json:"preferred_lft,omitempty"`
	ValidLft    int    `json:"valid_lft,omitempty"`
}

func (h Host) loadState() (Saved, error) {
	if h.Saved == nil {
		return Saved{}, nil
	}
	s, err := h.Saved.Load()
	if err != nil {
		return s, fmt.Errorf("read netsetup state: %w", err)
	}
	return s, nil
}

// updateState applies fn to the saved state and saves it.
func (h Host) updateState(fn func(*Saved)) error {
	if h.Saved == nil {
		return nil
	}
	s, err := h.loadState()
	if err != nil {
		return err
	}
	fn(&s)
	if err := h.Saved.Save(s); err != nil {
		return fmt.Errorf("save netsetup state: %w", err)
	}
	return nil
}

// MovedInterface is the interface whose addresses h's saved state says were moved into a
// bridge ("" when none).
func (h Host) MovedInterface() (string, error) {
	s, err := h.loadState()
	if err != nil || s.Moved == nil {
		return "", err
	}
	return s.Moved.Interface, nil
}
