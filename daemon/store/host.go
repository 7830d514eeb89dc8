package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// HostVersion is the shape of the host record this binary writes (Host.Version). A
// change of the record's meaning bumps it, with a schema update that rewrites old rows.
const HostVersion = 1

// Host is the desired host in one record: what osd init or osd join asked for, what the
// first converge decided from it, and what the host steps keep so that osd reset can undo
// them. It is one row of the host table, read whole and written whole in one transaction
// (UpdateHost).
type Host struct {
	Version int // HostVersion when written by this binary
	// Initialized: osd init asked for this host; the daemon converges it at every start.
	Initialized bool
	// Goal is how far converge goes ("openstack", "kubernetes"; "" before osd init).
	Goal string
	// TunnelInterface is the tunnel interface osd init or osd join asked for: a name,
	// "auto" or "none" ("" when never asked: no tunnel bridge).
	TunnelInterface string
	// ExternalWanted is the external network osd init asked for (nil: the daemon's own
	// configuration); External the one the external-network step made (nil before).
	ExternalWanted *Network
	External       *Network
	Storage        Storage
	// Release is the OpenStack release this host's cloud runs, by codename, recorded by
	// the first osd init or osd join ("" on a host initialized before releases were
	// recorded: state.ReleaseOf says what that means).
	Release string
	// Join is this node's join to a cluster (nil when it never joined).
	Join *Join
	// NetExternal and NetTunnel are what netsetup saved of the external network and of
	// the tunnel bridge (its JSON, opaque here: the ip_forward value and the addresses
	// moved off an interface), read back by osd reset.
	NetExternal string
	NetTunnel   string
}

// Deployed reports whether a cloud was asked of this host: osd init ran, or it joined.
func (h Host) Deployed() bool { return h.Initialized || h.Join != nil }

// Network is an external network (netsetup.ExternalNetwork's fields).
type Network struct {
	Bridge, CIDR, GatewayIP, Interface string
}

// Storage is osd init's storage request and the first converge's decision.
type Storage struct {
	Wanted     string // osd init --storage ("" leaves it to the host probe)
	SizeWanted int64  // osd init --storage-size, bytes (0: default)
	Backend    string // as decided ("" before the first converge)
	Reason     string
	Size       int64 // bytes
}

// Join is what a join keeps so that a restart can resume it and a member can restart its
// agent: the token's name, secret and cluster, and the k3s join information.
type Join struct {
	State       string // joining, member or removed
	Name        string
	Secret      string // dropped once the join completed
	Roles       []string
	Fingerprint string
	Addresses   []string
	Server      string // the address that answered the join
	Address     string // this node's own API address
	K3sURL      string
	K3sToken    string
	Hostname    string // "" in joins from before joins sent one
}

// hostColumns are the host table's columns in the order readHost and writeHost use;
// hostColumnsV7 those the table had at schema version 7, when it was made (the update
// that made it writes its first row with them).
const (
	hostColumns   = hostColumnsV7 + `, release`
	hostColumnsV7 = `version, initialized, goal, tunnel_interface,
	ext_wanted_bridge, ext_wanted_cidr, ext_wanted_gateway, ext_wanted_interface,
	ext_bridge, ext_cidr, ext_gateway, ext_interface,
	storage_wanted, storage_size_wanted, storage_backend, storage_reason, storage_size,
	join_state, join_name, join_secret, join_roles, join_fingerprint, join_addresses,
	join_server, join_address, join_k3s_url, join_k3s_token, join_hostname,
	net_external, net_tunnel`
)

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func readHost(ctx context.Context, q queryer) (Host, error) {
	var h Host
	var init int
	var wb, wc, wg, wi, eb, ec, eg, ei sql.NullString
	var j Join
	var roles, addrs string
	err := q.QueryRowContext(ctx, `SELECT `+hostColumns+` FROM host WHERE id = 1`).Scan(
		&h.Version, &init, &h.Goal, &h.TunnelInterface,
		&wb, &wc, &wg, &wi, &eb, &ec, &eg, &ei,
		&h.Storage.Wanted, &h.Storage.SizeWanted, &h.Storage.Backend, &h.Storage.Reason, &h.Storage.Size,
		&j.State, &j.Name, &j.Secret, &roles, &j.Fingerprint, &addrs,
		&j.Server, &j.Address, &j.K3sURL, &j.K3sToken, &j.Hostname,
		&h.NetExternal, &h.NetTunnel, &h.Release)
	if errors.Is(err, sql.ErrNoRows) {
		return Host{Version: HostVersion}, nil
	}
	if err != nil {
		return h, fmt.Errorf("read host record: %w", err)
	}
	if h.Version > HostVersion {
		return h, fmt.Errorf("host record version %d is newer than this osd supports (%d); upgrade osd", h.Version, HostVersion)
	}
	h.Initialized = init != 0
	h.ExternalWanted = network(wb, wc, wg, wi)
	h.External = network(eb, ec, eg, ei)
	if j.State != "" {
		j.Roles, j.Addresses = splitList(roles), splitList(addrs)
		h.Join = &j
	}
	return h, nil
}

func network(b, c, g, i sql.NullString) *Network {
	if !b.Valid {
		return nil
	}
	return &Network{Bridge: b.String, CIDR: c.String, GatewayIP: g.String, Interface: i.String}
}

func networkArgs(n *Network) []any {
	if n == nil {
		return []any{nil, nil, nil, nil}
	}
	return []any{n.Bridge, n.CIDR, n.GatewayIP, n.Interface}
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func writeHost(ctx context.Context, tx *sql.Tx, h Host) error {
	return writeHostColumns(ctx, tx, h, hostColumns)
}

// writeHostColumns writes h with cols, hostColumns or a prefix of it (hostColumnsV7):
// the values of the columns past the prefix are left out.
func writeHostColumns(ctx context.Context, tx *sql.Tx, h Host, cols string) error {
	var j Join
	if h.Join != nil {
		j = *h.Join
		if j.State == "" {
			return errors.New("write host record: a join without a state")
		}
	}
	for _, v := range append(append([]string{}, j.Roles...), j.Addresses...) {
		if v == "" || strings.Contains(v, ",") {
			return fmt.Errorf("write host record: join role or address %q is empty or holds a comma", v)
		}
	}
	init := 0
	if h.Initialized {
		init = 1
	}
	args := []any{HostVersion, init, h.Goal, h.TunnelInterface}
	args = append(args, networkArgs(h.ExternalWanted)...)
	args = append(args, networkArgs(h.External)...)
	args = append(args, h.Storage.Wanted, h.Storage.SizeWanted, h.Storage.Backend, h.Storage.Reason, h.Storage.Size,
		j.State, j.Name, j.Secret, strings.Join(j.Roles, ","), j.Fingerprint, strings.Join(j.Addresses, ","),
		j.Server, j.Address, j.K3sURL, j.K3sToken, j.Hostname, h.NetExternal, h.NetTunnel, h.Release, now())
	if n := strings.Count(cols, ",") + 1; n < len(args)-1 {
		args = append(args[:n], args[len(args)-1]) // the columns cols names, then updated_at
	}
	marks := strings.Repeat("?, ", len(args)-1) + "?"
	_, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO host(id, `+cols+`, updated_at) VALUES (1, `+marks+`)`, args...)
	if err != nil {
		return fmt.Errorf("write host record: %w", err)
	}
	return nil
}

// Host reads the host record (the zero record of HostVersion on a host nothing asked for).
func (d *DB) Host(ctx context.Context) (Host, error) { return readHost(ctx, d.db) }

// UpdateHost changes the host record with fn in one transaction: fn gets the record as
// stored and changes it in place; nothing is written when it returns an error.
func (d *DB) UpdateHost(ctx context.Context, fn func(h *Host) error) error {
	return d.Transaction(ctx, func(ctx context.Context, tx *sql.Tx) error {
		h, err := readHost(ctx, tx)
		if err != nil {
			return err
		}
		if err := fn(&h); err != nil {
			return err
		}
		return writeHost(ctx, tx, h)
	})
}
