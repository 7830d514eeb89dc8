package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
)

// The configuration keys and files a host kept its record in before schema version 7
// (updateFromV6 folds them into the host table). Nothing else names them.
const (
	legacyInitialized    = "init.requested"
	legacyGoal           = "init.goal"
	legacyExternalWanted = "init.external_network"
	legacyExternal       = "host.external_network"
	legacyTunnel         = "host.tunnel_interface"
	legacyJoinState      = "join.state"
	legacyStorageWanted  = "init.storage_backend"
	legacyStorageSizeW   = "init.storage_size_bytes"
	legacyStorageBackend = "storage.backend"
	legacyStorageReason  = "storage.reason"
	legacyStorageSize    = "storage.size_bytes"
)

var legacyKeys = []string{legacyInitialized, legacyGoal, legacyExternalWanted, legacyExternal, legacyTunnel, legacyJoinState,
	legacyStorageWanted, legacyStorageSizeW, legacyStorageBackend, legacyStorageReason, legacyStorageSize}

// legacyFiles are the files, relative to the state dir, the host record replaced.
var (
	legacyJoinFile        = filepath.Join("cluster", "join.json")
	legacyNetExternalFile = filepath.Join("host", "netsetup.json")
	legacyNetTunnelFile   = filepath.Join("host", "tunnel", "netsetup.json")
	legacyFiles           = []string{legacyJoinFile, legacyNetExternalFile, legacyNetTunnelFile}
)

// legacyJoin is join.json as osd join wrote it.
type legacyJoin struct {
	State       string   `json:"state"`
	Name        string   `json:"name"`
	Secret      string   `json:"secret,omitempty"`
	Roles       []string `json:"roles"`
	Fingerprint string   `json:"fingerprint"`
	Addresses   []string `json:"addresses"`
	Server      string   `json:"server"`
	Address     string   `json:"address"`
	K3sURL      string   `json:"k3s_server_url"`
	K3sToken    string   `json:"k3s_token"`
	Hostname    string   `json:"hostname,omitempty"`
}

type stateDirKey struct{}

// withStateDir tells the schema updates where the database's state dir is (the files
// updateFromV6 folds in); "" for an in-memory database.
func withStateDir(ctx context.Context, dir string) context.Context {
	return context.WithValue(ctx, stateDirKey{}, dir)
}

func stateDirOf(ctx context.Context) string {
	dir, _ := ctx.Value(stateDirKey{}).(string)
	return dir
}

// legacyHost is the host record as the configuration keys and the files in dir ("" for
// none) held it.
func legacyHost(ctx context.Context, tx *sql.Tx, dir string) (Host, error) {
	conf := map[string]string{}
	for _, k := range legacyKeys {
		var v string
		err := tx.QueryRowContext(ctx, `SELECT value FROM config WHERE key = ?`, k).Scan(&v)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return Host{}, fmt.Errorf("read config %q: %w", k, err)
		}
		conf[k] = v
	}
	h := Host{Version: HostVersion, Initialized: conf[legacyInitialized] == "true", Goal: conf[legacyGoal], TunnelInterface: conf[legacyTunnel]}
	var err error
	if h.ExternalWanted, err = legacyNetwork(conf, legacyExternalWanted); err != nil {
		return h, err
	}
	if h.External, err = legacyNetwork(conf, legacyExternal); err != nil {
		return h, err
	}
	h.Storage.Wanted, h.Storage.Backend, h.Storage.Reason = conf[legacyStorageWanted], conf[legacyStorageBackend], conf[legacyStorageReason]
	for k, p := range map[string]*int64{legacyStorageSizeW: &h.Storage.SizeWanted, legacyStorageSize: &h.Storage.Size} {
		if v := conf[k]; v != "" {
			if *p, err = strconv.ParseInt(v, 10, 64); err != nil {
				return h, fmt.Errorf("config %s = %q: %w", k, v, err)
			}
		}
	}
	if dir == "" {
		return h, nil
	}
	if b, err := readLegacy(dir, legacyJoinFile); err != nil {
		return h, err
	} else if b != nil {
		var j legacyJoin
		if err := json.Unmarshal(b, &j); err != nil {
			return h, fmt.Errorf("read %s: %w", filepath.Join(dir, legacyJoinFile), err)
		}
		h.Join = &Join{State: j.State, Name: j.Name, Secret: j.Secret, Roles: j.Roles, Fingerprint: j.Fingerprint, Addresses: j.Addresses,
			Server: j.Server, Address: j.Address, K3sURL: j.K3sURL, K3sToken: j.K3sToken, Hostname: j.Hostname}
	}
	for f, p := range map[string]*string{legacyNetExternalFile: &h.NetExternal, legacyNetTunnelFile: &h.NetTunnel} {
		b, err := readLegacy(dir, f)
		if err != nil {
			return h, err
		}
		if b != nil && !json.Valid(b) {
			return h, fmt.Errorf("read %s: not JSON", filepath.Join(dir, f))
		}
		*p = string(b)
	}
	return h, nil
}

// legacyNetwork is the external network stored under key as JSON (nil when unset).
func legacyNetwork(conf map[string]string, key string) (*Network, error) {
	v, ok := conf[key]
	if !ok || v == "" {
		return nil, nil
	}
	var n Network
	if err := json.Unmarshal([]byte(v), &n); err != nil {
		return nil, fmt.Errorf("config %s = %q: %w", key, v, err)
	}
	return &n, nil
}

// readLegacy reads dir/name (nil when it does not exist).
func readLegacy(dir, name string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, name), err)
	}
	return b, nil
}

// removeFolded removes the files updateFromV6 folded into the host record, once the
// database is past it (a crash between the update's commit and the removal leaves them
// for the next open; nothing reads them).
func (d *DB) removeFolded(ctx context.Context) error {
	if d.path == "" {
		return nil
	}
	v, err := d.SchemaVersion(ctx)
	if err != nil || v < 7 {
		return err
	}
	dir := filepath.Dir(d.path)
	for _, f := range legacyFiles {
		p := filepath.Join(dir, f)
		if err := os.Remove(p); err == nil {
			slog.Info("state file folded into the state database: removed", "file", p)
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove %s (folded into the state database): %w", p, err)
		}
	}
	return nil
}
