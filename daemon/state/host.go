package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	bimages "github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/daemon/store"
	"github.com/osdcloud/osd/netsetup"
)

// Host is this host's record: what osd init or osd join asked for and what the steps
// decided and keep (store.Host). Every step reads it here.
func (s *State) Host(ctx context.Context) (store.Host, error) {
	if s.DB == nil {
		return store.Host{}, errors.New("the state database is not open yet")
	}
	return s.DB.Host(ctx)
}

// UpdateHost changes this host's record with fn in one transaction (nothing is written
// when fn fails).
func (s *State) UpdateHost(ctx context.Context, fn func(h *store.Host) error) error {
	return s.DB.UpdateHost(ctx, fn)
}

// Initialized reports whether osd init was asked for on this host (false when the record
// cannot be read).
func (s *State) Initialized(ctx context.Context) bool {
	h, err := s.Host(ctx)
	return err == nil && h.Initialized
}

// KubernetesOnly reports whether osd init asked for Kubernetes without OpenStack.
func (s *State) KubernetesOnly(ctx context.Context) bool {
	h, err := s.Host(ctx)
	return err == nil && h.Goal == GoalKubernetes
}

// Network and FromNetwork convert an external network to and from the record's shape.
func Network(n netsetup.ExternalNetwork) *store.Network {
	return &store.Network{Bridge: n.Bridge, CIDR: n.CIDR, GatewayIP: n.GatewayIP, Interface: n.Interface}
}

func FromNetwork(n store.Network) netsetup.ExternalNetwork {
	return netsetup.ExternalNetwork{Bridge: n.Bridge, CIDR: n.CIDR, GatewayIP: n.GatewayIP, Interface: n.Interface}
}

// The parts of the host network netsetup keeps state of (NetSaved).
const (
	NetExternal = "external" // the external network (br-ex)
	NetTunnel   = "tunnel"   // the tunnel bridge
)

// NetSaved is netsetup's saved state of one part of the host network (NetExternal or
// NetTunnel), kept in the host record of db so that osd reset, with the daemon
// stopped, finds it in the state database.
func NetSaved(db *store.DB, part string) netsetup.SavedState { return netSaved{db: db, part: part} }

type netSaved struct {
	db   *store.DB
	part string
}

func (n netSaved) field(h *store.Host) *string {
	if n.part == NetTunnel {
		return &h.NetTunnel
	}
	return &h.NetExternal
}

func (n netSaved) Load() (netsetup.Saved, error) {
	var s netsetup.Saved
	h, err := n.db.Host(context.Background())
	if err != nil {
		return s, err
	}
	if v := *n.field(&h); v != "" {
		if err := json.Unmarshal([]byte(v), &s); err != nil {
			return s, fmt.Errorf("netsetup state of the %s network: %w", n.part, err)
		}
	}
	return s, nil
}

func (n netSaved) Save(s netsetup.Saved) error {
	v := ""
	if !s.Empty() {
		b, err := json.Marshal(s)
		if err != nil {
			return err
		}
		v = string(b)
	}
	return n.db.UpdateHost(context.Background(), func(h *store.Host) error {
		*n.field(h) = v
		return nil
	})
}

// ReleaseOf is the OpenStack release host record h's cloud runs (pure, see
// images.RecordedRelease): the recorded one, Zed for a host initialized or joined before
// osd recorded releases, the default for a host nothing was asked of yet.
func ReleaseOf(h store.Host) (bimages.Release, error) {
	return bimages.RecordedRelease(h.Release, h.Deployed())
}

// Release is the OpenStack release this host's cloud runs (ReleaseOf its record; the
// default release while no state database is open: nothing is recorded then).
func (s *State) Release(ctx context.Context) (bimages.Release, error) {
	if s.DB == nil {
		return bimages.DefaultRelease(), nil
	}
	h, err := s.Host(ctx)
	if err != nil {
		return bimages.Release{}, err
	}
	return ReleaseOf(h)
}
