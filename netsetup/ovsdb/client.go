// Package ovsdb is osd's small client for the Open_vSwitch database: hand-written
// models for the four tables osd touches (Open_vSwitch, Bridge, Port, Interface)
// and idempotent helpers over github.com/ovn-org/libovsdb that report whether
// they changed anything.
package ovsdb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
)

// OVS is a connected, monitoring client of one ovsdb-server.
type OVS struct {
	c client.Client
}

// PortInfo describes one port of a bridge and the type of its (first) interface.
type PortInfo struct {
	Name string
	Type string // "" (system), "internal", ...
}

// BridgeInfo describes one bridge and its ports, sorted by name.
type BridgeInfo struct {
	Name         string
	DatapathType string
	Ports        []PortInfo
}

// Connect dials the ovsdb-server unix socket at socketPath, monitors the tables of
// the model and returns when the cache holds the current contents.
func Connect(ctx context.Context, socketPath string) (*OVS, error) {
	dbModel, err := DatabaseModel()
	if err != nil {
		return nil, fmt.Errorf("ovsdb model: %w", err)
	}
	discard := logr.Discard()
	c, err := client.NewOVSDBClient(dbModel, client.WithEndpoint("unix:"+socketPath), client.WithLogger(&discard))
	if err != nil {
		return nil, fmt.Errorf("ovsdb client: %w", err)
	}
	if err := c.Connect(ctx); err != nil {
		return nil, fmt.Errorf("connect to ovsdb at %s: %w", socketPath, err)
	}
	// Monitor exactly the modelled columns: with all columns, libovsdb fails on
	// columns the hand-written models leave out (e.g. Interface.link_state).
	root, br, port, iface := &OpenvSwitch{}, &Bridge{}, &Port{}, &Interface{}
	m := c.NewMonitor(
		client.WithTable(root, &root.Bridges, &root.ExternalIDs, &root.OtherConfig, &root.NextCfg, &root.CurCfg),
		client.WithTable(br, &br.Name, &br.Ports, &br.DatapathType, &br.ExternalIDs, &br.OtherConfig),
		client.WithTable(port, &port.Name, &port.Interfaces, &port.ExternalIDs),
		client.WithTable(iface, &iface.Name, &iface.Type, &iface.OFPort, &iface.Error, &iface.ExternalIDs),
	)
	if len(m.Errors) > 0 {
		c.Close()
		return nil, fmt.Errorf("ovsdb monitor request: %w", errors.Join(m.Errors...))
	}
	if _, err := c.Monitor(ctx, m); err != nil {
		c.Close()
		return nil, fmt.Errorf("monitor ovsdb at %s: %w", socketPath, err)
	}
	return &OVS{c: c}, nil
}

// Close disconnects the client.
func (o *OVS) Close() { o.c.Close() }

// Echo checks that the server answers.
func (o *OVS) Echo(ctx context.Context) error { return o.c.Echo(ctx) }

func (o *OVS) transact(ctx context.Context, ops ...ovsdb.Operation) ([]ovsdb.OperationResult, error) {
	res, err := o.c.Transact(ctx, ops...)
	if err != nil {
		return nil, fmt.Errorf("ovsdb transact: %w", err)
	}
	if opErrs, err := ovsdb.CheckOperationResults(res, ops); err != nil {
		details := make([]error, 0, len(opErrs))
		for _, e := range opErrs {
			details = append(details, e)
		}
		return nil, fmt.Errorf("ovsdb transact: %w: %w", err, errors.Join(details...))
	}
	return res, nil
}

// await polls the monitor cache until cond holds: libovsdb does not promise that the
// update notification of a transaction is applied before the transaction returns.
func (o *OVS) await(ctx context.Context, what string, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s in ovsdb cache: %w", what, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// root returns the single Open_vSwitch row, or nil when the database has none yet.
func (o *OVS) root(ctx context.Context) (*OpenvSwitch, error) {
	var rows []OpenvSwitch
	if err := o.c.List(ctx, &rows); err != nil {
		return nil, fmt.Errorf("list Open_vSwitch: %w", err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	return &rows[0], nil
}

// EnsureRoot creates the Open_vSwitch root row if the database has none (a database
// fresh from ovsdb-tool create is empty).
func (o *OVS) EnsureRoot(ctx context.Context) (bool, error) {
	r, err := o.root(ctx)
	if err != nil || r != nil {
		return false, err
	}
	// libovsdb's Create leaves out default values, and an insert needs a non-empty row.
	op := ovsdb.Operation{Op: ovsdb.OperationInsert, Table: tableOpenvSwitch, UUIDName: "root",
		Row: ovsdb.Row{"next_cfg": 0}}
	if _, err := o.transact(ctx, op); err != nil {
		return false, err
	}
	return true, o.await(ctx, "Open_vSwitch row", func() bool { r, _ := o.root(ctx); return r != nil })
}

func (o *OVS) mustRoot(ctx context.Context) (*OpenvSwitch, error) {
	r, err := o.root(ctx)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, errors.New("ovsdb has no Open_vSwitch row")
	}
	return r, nil
}

// ExternalIDs returns external_ids of the Open_vSwitch row.
func (o *OVS) ExternalIDs(ctx context.Context) (map[string]string, error) {
	r, err := o.mustRoot(ctx)
	if err != nil {
		return nil, err
	}
	return r.ExternalIDs, nil
}

// OtherConfig returns other_config of the Open_vSwitch row.
func (o *OVS) OtherConfig(ctx context.Context) (map[string]string, error) {
	r, err := o.mustRoot(ctx)
	if err != nil {
		return nil, err
	}
	return r.OtherConfig, nil
}

// SetExternalIDs sets the given keys in external_ids of the Open_vSwitch row, leaving
// other keys alone. An empty value deletes the key.
func (o *OVS) SetExternalIDs(ctx context.Context, kv map[string]string) (bool, error) {
	return o.setRootMap(ctx, kv, func(r *OpenvSwitch) *map[string]string { return &r.ExternalIDs })
}

// SetOtherConfig sets the given keys in other_config of the Open_vSwitch row, leaving
// other keys alone. An empty value deletes the key.
func (o *OVS) SetOtherConfig(ctx context.Context, kv map[string]string) (bool, error) {
	return o.setRootMap(ctx, kv, func(r *OpenvSwitch) *map[string]string { return &r.OtherConfig })
}

func (o *OVS) setRootMap(ctx context.Context, kv map[string]string, field func(*OpenvSwitch) *map[string]string) (bool, error) {
	r, err := o.mustRoot(ctx)
	if err != nil {
		return false, err
	}
	merged, changed := mergeMap(*field(r), kv)
	if !changed {
		return false, nil
	}
	row := &OpenvSwitch{UUID: r.UUID}
	*field(row) = merged
	ops, err := o.c.Where(row).Update(row, field(row))
	if err != nil {
		return false, fmt.Errorf("update Open_vSwitch: %w", err)
	}
	if _, err := o.transact(ctx, ops...); err != nil {
		return false, err
	}
	return true, o.await(ctx, "Open_vSwitch update", func() bool {
		r, err := o.root(ctx)
		if err != nil || r == nil {
			return false
		}
		_, pending := mergeMap(*field(r), kv)
		return !pending
	})
}

// mergeMap returns old with kv applied (empty value deletes) and whether that differs from old.
func mergeMap(old, kv map[string]string) (map[string]string, bool) {
	out := make(map[string]string, len(old)+len(kv))
	for k, v := range old {
		out[k] = v
	}
	changed := false
	for k, v := range kv {
		cur, ok := out[k]
		switch {
		case v == "" && ok:
			delete(out, k)
			changed = true
		case v != "" && (!ok || cur != v):
			out[k] = v
			changed = true
		}
	}
	return out, changed
}

func (o *OVS) bridge(ctx context.Context, name string) (*Bridge, error) {
	b := &Bridge{Name: name}
	err := o.c.Get(ctx, b)
	if errors.Is(err, client.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get bridge %s: %w", name, err)
	}
	return b, nil
}

func (o *OVS) port(ctx context.Context, name string) (*Port, error) {
	p := &Port{Name: name}
	err := o.c.Get(ctx, p)
	if errors.Is(err, client.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get port %s: %w", name, err)
	}
	return p, nil
}

func (o *OVS) iface(ctx context.Context, name string) (*Interface, error) {
	i := &Interface{Name: name}
	err := o.c.Get(ctx, i)
	if errors.Is(err, client.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get interface %s: %w", name, err)
	}
	return i, nil
}

// InterfaceExternalIDs is interface name's external_ids (nil when there is no such
// interface), as the cache held them when the client connected or last heard.
func (o *OVS) InterfaceExternalIDs(ctx context.Context, name string) (map[string]string, error) {
	i, err := o.iface(ctx, name)
	if err != nil || i == nil {
		return nil, err
	}
	return i.ExternalIDs, nil
}

// EnsureBridge creates bridge name with its local (internal) port, as ovs-vsctl
// add-br does, or corrects its datapath_type.
func (o *OVS) EnsureBridge(ctx context.Context, name, datapathType string) (bool, error) {
	r, err := o.mustRoot(ctx)
	if err != nil {
		return false, err
	}
	b, err := o.bridge(ctx, name)
	if err != nil {
		return false, err
	}
	if b != nil {
		if b.DatapathType == datapathType {
			return false, nil
		}
		row := &Bridge{UUID: b.UUID, DatapathType: datapathType}
		ops, err := o.c.Where(row).Update(row, &row.DatapathType)
		if err != nil {
			return false, fmt.Errorf("update bridge %s: %w", name, err)
		}
		if _, err := o.transact(ctx, ops...); err != nil {
			return false, err
		}
		return true, o.await(ctx, "bridge "+name, func() bool {
			b, _ := o.bridge(ctx, name)
			return b != nil && b.DatapathType == datapathType
		})
	}
	iface := &Interface{UUID: "newiface", Name: name, Type: "internal"}
	port := &Port{UUID: "newport", Name: name, Interfaces: []string{iface.UUID}}
	br := &Bridge{UUID: "newbridge", Name: name, Ports: []string{port.UUID}, DatapathType: datapathType}
	ops, err := o.c.Create(iface, port, br)
	if err != nil {
		return false, fmt.Errorf("create bridge %s: %w", name, err)
	}
	rootRow := &OpenvSwitch{UUID: r.UUID}
	mut, err := o.c.Where(rootRow).Mutate(rootRow, model.Mutation{
		Field: &rootRow.Bridges, Mutator: ovsdb.MutateOperationInsert, Value: []string{br.UUID},
	})
	if err != nil {
		return false, fmt.Errorf("add bridge %s: %w", name, err)
	}
	if _, err := o.transact(ctx, append(ops, mut...)...); err != nil {
		return false, err
	}
	return true, o.await(ctx, "bridge "+name, func() bool { b, _ := o.bridge(ctx, name); return b != nil })
}

// DeleteBridge removes bridge name (its ports and interfaces go with it).
func (o *OVS) DeleteBridge(ctx context.Context, name string) (bool, error) {
	b, err := o.bridge(ctx, name)
	if err != nil || b == nil {
		return false, err
	}
	r, err := o.mustRoot(ctx)
	if err != nil {
		return false, err
	}
	rootRow := &OpenvSwitch{UUID: r.UUID}
	ops, err := o.c.Where(rootRow).Mutate(rootRow, model.Mutation{
		Field: &rootRow.Bridges, Mutator: ovsdb.MutateOperationDelete, Value: []string{b.UUID},
	})
	if err != nil {
		return false, fmt.Errorf("delete bridge %s: %w", name, err)
	}
	if _, err := o.transact(ctx, ops...); err != nil {
		return false, err
	}
	return true, o.await(ctx, "removal of bridge "+name, func() bool { b, _ := o.bridge(ctx, name); return b == nil })
}

// EnsurePort adds port (with one interface of the same name and type ifaceType: ""
// for a system device, "internal", ...) to bridge, or corrects the interface type.
// A port of that name on another bridge is an error.
func (o *OVS) EnsurePort(ctx context.Context, bridge, port, ifaceType string) (bool, error) {
	b, err := o.bridge(ctx, bridge)
	if err != nil {
		return false, err
	}
	if b == nil {
		return false, fmt.Errorf("add port %s: bridge %s does not exist", port, bridge)
	}
	p, err := o.port(ctx, port)
	if err != nil {
		return false, err
	}
	if p != nil {
		if !slices.Contains(b.Ports, p.UUID) {
			return false, fmt.Errorf("add port %s to %s: port exists on another bridge", port, bridge)
		}
		i, err := o.iface(ctx, port)
		if err != nil {
			return false, err
		}
		if i == nil {
			return false, fmt.Errorf("port %s has no interface named %s", port, port)
		}
		if i.Type == ifaceType {
			return false, nil
		}
		row := &Interface{UUID: i.UUID, Type: ifaceType}
		ops, err := o.c.Where(row).Update(row, &row.Type)
		if err != nil {
			return false, fmt.Errorf("update interface %s: %w", port, err)
		}
		if _, err := o.transact(ctx, ops...); err != nil {
			return false, err
		}
		return true, o.await(ctx, "interface "+port, func() bool {
			i, _ := o.iface(ctx, port)
			return i != nil && i.Type == ifaceType
		})
	}
	iface := &Interface{UUID: "newiface", Name: port, Type: ifaceType}
	newPort := &Port{UUID: "newport", Name: port, Interfaces: []string{iface.UUID}}
	ops, err := o.c.Create(iface, newPort)
	if err != nil {
		return false, fmt.Errorf("create port %s: %w", port, err)
	}
	brRow := &Bridge{UUID: b.UUID}
	mut, err := o.c.Where(brRow).Mutate(brRow, model.Mutation{
		Field: &brRow.Ports, Mutator: ovsdb.MutateOperationInsert, Value: []string{newPort.UUID},
	})
	if err != nil {
		return false, fmt.Errorf("add port %s to %s: %w", port, bridge, err)
	}
	if _, err := o.transact(ctx, append(ops, mut...)...); err != nil {
		return false, err
	}
	return true, o.await(ctx, "port "+port, func() bool { p, _ := o.port(ctx, port); return p != nil })
}

// DeletePort removes port from bridge.
func (o *OVS) DeletePort(ctx context.Context, bridge, port string) (bool, error) {
	b, err := o.bridge(ctx, bridge)
	if err != nil || b == nil {
		return false, err
	}
	p, err := o.port(ctx, port)
	if err != nil || p == nil || !slices.Contains(b.Ports, p.UUID) {
		return false, err
	}
	brRow := &Bridge{UUID: b.UUID}
	ops, err := o.c.Where(brRow).Mutate(brRow, model.Mutation{
		Field: &brRow.Ports, Mutator: ovsdb.MutateOperationDelete, Value: []string{p.UUID},
	})
	if err != nil {
		return false, fmt.Errorf("delete port %s: %w", port, err)
	}
	if _, err := o.transact(ctx, ops...); err != nil {
		return false, err
	}
	return true, o.await(ctx, "removal of port "+port, func() bool { p, _ := o.port(ctx, port); return p == nil })
}

// Bridges lists all bridges with their ports, sorted by name.
func (o *OVS) Bridges(ctx context.Context) ([]BridgeInfo, error) {
	var bridges []Bridge
	if err := o.c.List(ctx, &bridges); err != nil {
		return nil, fmt.Errorf("list bridges: %w", err)
	}
	var ports []Port
	if err := o.c.List(ctx, &ports); err != nil {
		return nil, fmt.Errorf("list ports: %w", err)
	}
	var ifaces []Interface
	if err := o.c.List(ctx, &ifaces); err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	portByUUID := make(map[string]Port, len(ports))
	for _, p := range ports {
		portByUUID[p.UUID] = p
	}
	ifaceByUUID := make(map[string]Interface, len(ifaces))
	for _, i := range ifaces {
		ifaceByUUID[i.UUID] = i
	}
	out := make([]BridgeInfo, 0, len(bridges))
	for _, b := range bridges {
		bi := BridgeInfo{Name: b.Name, DatapathType: b.DatapathType}
		for _, pu := range b.Ports {
			p, ok := portByUUID[pu]
			if !ok {
				continue
			}
			pi := PortInfo{Name: p.Name}
			if len(p.Interfaces) > 0 {
				pi.Type = ifaceByUUID[p.Interfaces[0]].Type
			}
			bi.Ports = append(bi.Ports, pi)
		}
		slices.SortFunc(bi.Ports, func(a, b PortInfo) int { return cmpString(a.Name, b.Name) })
		out = append(out, bi)
	}
	slices.SortFunc(out, func(a, b BridgeInfo) int { return cmpString(a.Name, b.Name) })
	return out, nil
}

// InterfaceReady reports whether vswitchd has attached interface name (ofport
// assigned) and the error it recorded, if any. It asks the server, not the cache:
// libovsdb v0.7.0's cache misses updates of optional columns such as ofport.
func (o *OVS) InterfaceReady(ctx context.Context, name string) (bool, string, error) {
	op := ovsdb.Operation{Op: ovsdb.OperationSelect, Table: tableInterface,
		Where:   []ovsdb.Condition{{Column: "name", Function: ovsdb.ConditionEqual, Value: name}},
		Columns: []string{"ofport", "error"}}
	res, err := o.transact(ctx, op)
	if err != nil {
		return false, "", err
	}
	if len(res) == 0 || len(res[0].Rows) == 0 {
		return false, "", nil
	}
	row := res[0].Rows[0]
	ofport, _ := row["ofport"].(float64)
	msg, _ := row["error"].(string)
	return ofport > 0, msg, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
