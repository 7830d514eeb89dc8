// Package ovnsb is osd's small client for OVN's southbound database: it lists the chassis
// (each node's ovn-controller, with its tunnel encapsulations) and deletes the chassis of a
// node that left the cluster, over github.com/ovn-org/libovsdb with hand-written models of
// the three tables it touches.
package ovnsb

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/go-logr/logr"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
)

// Chassis is the subset of the Chassis table osd reads.
type Chassis struct {
	UUID     string   `ovsdb:"_uuid"`
	Name     string   `ovsdb:"name"`
	Hostname string   `ovsdb:"hostname"`
	Encaps   []string `ovsdb:"encaps"`
}

// Encap is the subset of the Encap table osd reads: one tunnel endpoint of a chassis.
type Encap struct {
	UUID        string `ovsdb:"_uuid"`
	Type        string `ovsdb:"type"`
	IP          string `ovsdb:"ip"`
	ChassisName string `ovsdb:"chassis_name"`
}

// ChassisPrivate is the subset of the Chassis_Private table osd deletes with a chassis.
type ChassisPrivate struct {
	UUID string `ovsdb:"_uuid"`
	Name string `ovsdb:"name"`
}

// DatabaseModel is the client model of the southbound database, restricted to the tables above.
func DatabaseModel() (model.ClientDBModel, error) {
	return model.NewClientDBModel("OVN_Southbound", map[string]model.Model{
		"Chassis":         &Chassis{},
		"Encap":           &Encap{},
		"Chassis_Private": &ChassisPrivate{},
	})
}

// Client is a connected, monitoring client of one southbound database.
type Client struct{ c client.Client }

// Connect dials endpoint (e.g. tcp:10.43.0.42:6642, or ssl:10.43.0.42:16642 with tlsCfg
// holding osd's client certificate and the OVN CA) and returns once the monitored tables
// are in the cache. tlsCfg is nil for tcp: and unix: endpoints.
func Connect(ctx context.Context, endpoint string, tlsCfg *tls.Config) (*Client, error) {
	m, err := DatabaseModel()
	if err != nil {
		return nil, fmt.Errorf("southbound model: %w", err)
	}
	discard := logr.Discard()
	opts := []client.Option{client.WithEndpoint(endpoint), client.WithLogger(&discard)}
	if tlsCfg != nil {
		opts = append(opts, client.WithTLSConfig(tlsCfg))
	}
	c, err := client.NewOVSDBClient(m, opts...)
	if err != nil {
		return nil, fmt.Errorf("southbound client: %w", err)
	}
	if err := c.Connect(ctx); err != nil {
		return nil, fmt.Errorf("connect to the OVN southbound database at %s: %w", endpoint, err)
	}
	ch, enc, priv := &Chassis{}, &Encap{}, &ChassisPrivate{}
	mon := c.NewMonitor(
		client.WithTable(ch, &ch.Name, &ch.Hostname, &ch.Encaps),
		client.WithTable(enc, &enc.Type, &enc.IP, &enc.ChassisName),
		client.WithTable(priv, &priv.Name),
	)
	if len(mon.Errors) > 0 {
		c.Close()
		return nil, fmt.Errorf("southbound monitor request: %w", errors.Join(mon.Errors...))
	}
	if _, err := c.Monitor(ctx, mon); err != nil {
		c.Close()
		return nil, fmt.Errorf("monitor the OVN southbound database at %s: %w", endpoint, err)
	}
	return &Client{c: c}, nil
}

// Close disconnects.
func (s *Client) Close() { s.c.Close() }

// ChassisInfo is one chassis as osd shows it.
type ChassisInfo struct {
	Name     string   // the chassis' system-id
	Hostname string   // the node it runs on
	Encaps   []string // "geneve 10.0.0.2", sorted
}

// List returns every chassis with its encapsulations, sorted by hostname then name.
func (s *Client) List(ctx context.Context) ([]ChassisInfo, error) {
	var chassis []Chassis
	if err := s.c.List(ctx, &chassis); err != nil {
		return nil, fmt.Errorf("list chassis: %w", err)
	}
	var encaps []Encap
	if err := s.c.List(ctx, &encaps); err != nil {
		return nil, fmt.Errorf("list encaps: %w", err)
	}
	return Describe(chassis, encaps), nil
}

// Describe joins chassis with their encapsulations (pure).
func Describe(chassis []Chassis, encaps []Encap) []ChassisInfo {
	byUUID := map[string]Encap{}
	for _, e := range encaps {
		byUUID[e.UUID] = e
	}
	out := make([]ChassisInfo, 0, len(chassis))
	for _, c := range chassis {
		ci := ChassisInfo{Name: c.Name, Hostname: c.Hostname}
		for _, u := range c.Encaps {
			if e, ok := byUUID[u]; ok {
				ci.Encaps = append(ci.Encaps, e.Type+" "+e.IP)
			}
		}
		sort.Strings(ci.Encaps)
		out = append(out, ci)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Hostname != out[j].Hostname {
			return out[i].Hostname < out[j].Hostname
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// DeleteHost deletes the chassis whose hostname is host, with their Chassis_Private rows
// (their Encap rows go with them), and returns their names. A node's ovn-controller
// killed or gone leaves its chassis behind: Neutron would keep it as an agent and OVN
// keep tunnels to it.
func (s *Client) DeleteHost(ctx context.Context, host string) ([]string, error) {
	var chassis []Chassis
	if err := s.c.List(ctx, &chassis); err != nil {
		return nil, fmt.Errorf("list chassis: %w", err)
	}
	var privs []ChassisPrivate
	if err := s.c.List(ctx, &privs); err != nil {
		return nil, fmt.Errorf("list chassis_private: %w", err)
	}
	var names []string
	var ops []ovsdb.Operation
	for _, c := range chassis {
		if c.Hostname != host {
			continue
		}
		names = append(names, c.Name)
		op, err := s.c.Where(&Chassis{UUID: c.UUID}).Delete()
		if err != nil {
			return nil, err
		}
		ops = append(ops, op...)
	}
	for _, p := range privs {
		if !slices.Contains(names, p.Name) {
			continue
		}
		op, err := s.c.Where(&ChassisPrivate{UUID: p.UUID}).Delete()
		if err != nil {
			return nil, err
		}
		ops = append(ops, op...)
	}
	if len(ops) == 0 {
		return nil, nil
	}
	res, err := s.c.Transact(ctx, ops...)
	if err != nil {
		return nil, fmt.Errorf("delete the chassis of %s: %w", host, err)
	}
	if _, err := ovsdb.CheckOperationResults(res, ops); err != nil {
		return nil, fmt.Errorf("delete the chassis of %s: %w", host, err)
	}
	sort.Strings(names)
	return names, nil
}
