package netsetup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Host says where the host network lives and how to change it safely.
type Host struct {
	// NetNS is the path of the network namespace to work in ("" = the caller's).
	// Tests point it at a namespace of their own; osd leaves it empty.
	NetNS string
	// OVSSocket is the ovsdb-server unix socket (OVSConfig.Socket()).
	OVSSocket string
	// StateDir keeps netsetup.json: the original ip_forward value when osd changed it
	// and the addresses and routes moved off an external interface, so that Teardown
	// can restore them. "" keeps nothing: Teardown then cannot restore them.
	StateDir string
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

// savedState is the content of StateDir/netsetup.json.
type savedState struct {
	// IPForwardOriginal is ip_forward before osd set it to 1 ("" = osd did not change it).
	IPForwardOriginal string       `json:"ip_forward_original,omitempty"`
	Moved             *movedConfig `json:"moved,omitempty"`
}

// movedConfig is the IP configuration osd moved from Interface to Bridge.
type movedConfig struct {
	Interface string      `json:"interface"`
	Bridge    string      `json:"bridge"`
	Addrs     []savedAddr `json:"addrs"`
	Routes    []Route     `json:"routes"`
}

type savedAddr struct {
	CIDR        string `json:"cidr"`
	Label       string `json:"label,omitempty"`
	Flags       int    `json:"flags,omitempty"`
	Scope       int    `json:"scope,omitempty"`
	Broadcast   string `json:"broadcast,omitempty"`
	PreferedLft int    `json:"preferred_lft,omitempty"`
	ValidLft    int    `json:"valid_lft,omitempty"`
}

func (h Host) statePath() string { return filepath.Join(h.StateDir, "netsetup.json") }

func (h Host) loadState() (savedState, error) {
	var s savedState
	if h.StateDir == "" {
		return s, nil
	}
	b, err := os.ReadFile(h.statePath())
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("read netsetup state: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("parse %s: %w", h.statePath(), err)
	}
	return s, nil
}

// updateState applies fn to the saved state and writes it back atomically.
func (h Host) updateState(fn func(*savedState)) error {
	if h.StateDir == "" {
		return nil
	}
	s, err := h.loadState()
	if err != nil {
		return err
	}
	fn(&s)
	if s.IPForwardOriginal == "" && s.Moved == nil {
		if err := os.Remove(h.statePath()); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove netsetup state: %w", err)
		}
		return nil
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode netsetup state: %w", err)
	}
	if err := os.MkdirAll(h.StateDir, 0o700); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	tmp := h.statePath() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write netsetup state: %w", err)
	}
	if err := os.Rename(tmp, h.statePath()); err != nil {
		return fmt.Errorf("write netsetup state: %w", err)
	}
	return nil
}

// MovedInterface is the interface whose addresses h's state file says were moved into a
// bridge ("" when none).
func (h Host) MovedInterface() (string, error) {
	s, err := h.loadState()
	if err != nil || s.Moved == nil {
		return "", err
	}
	return s.Moved.Interface, nil
}
