package store

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestHostRecordRoundTrip(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		h    Host
	}{
		{"zero", Host{}},
		{"init", Host{Initialized: true, Goal: "kubernetes", TunnelInterface: "auto",
			ExternalWanted: &Network{Bridge: "br-ex", Interface: "eth1"},
			External:       &Network{Bridge: "br-ex", CIDR: "172.24.4.0/24", GatewayIP: "172.24.4.1"},
			Storage:        Storage{Wanted: "lvm", SizeWanted: 30 << 30, Backend: "lvm", Reason: "asked for", Size: 30 << 30},
			NetExternal:    `{"ip_forward_original":"0"}`, NetTunnel: `{"moved":{"interface":"eth0"}}`}},
		{"join", Host{TunnelInterface: "eth0", Join: &Join{State: "member", Name: "n2", Roles: []string{"compute", "network"},
			Fingerprint: "ab12", Addresses: []string{"10.0.0.1:8443", "192.0.2.1:8443"}, Server: "10.0.0.1:8443",
			Address: "10.0.0.2:8443", K3sURL: "https://10.0.0.1:6443", K3sToken: "K10::x", Hostname: "h2"}}},
		{"join without roles", Host{Join: &Join{State: "joining", Name: "n3", Secret: "s"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := newMemory(t)
			if err := d.UpdateHost(ctx, func(h *Host) error { *h = c.h; return nil }); err != nil {
				t.Fatalf("UpdateHost() = %v", err)
			}
			got, err := d.Host(ctx)
			want := c.h
			want.Version = HostVersion
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("Host() = %+v, %v, want %+v", got, err, want)
			}
		})
	}
}

func TestUpdateHostWritesNothingOnError(t *testing.T) {
	ctx := context.Background()
	d := newMemory(t)
	if err := d.UpdateHost(ctx, func(h *Host) error { h.Goal = "openstack"; return nil }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := d.UpdateHost(ctx, func(h *Host) error { h.Initialized, h.Goal = true, "kubernetes"; return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("UpdateHost(failing) = %v, want boom", err)
	}
	bad := d.UpdateHost(ctx, func(h *Host) error { h.Join = &Join{State: "joining", Roles: []string{"a,b"}}; return nil })
	if bad == nil {
		t.Error("UpdateHost(role with a comma) = nil, want an error")
	}
	if h, _ := d.Host(ctx); h.Initialized || h.Goal != "openstack" || h.Join != nil {
		t.Errorf("Host() after failed updates = %+v, want only the first update", h)
	}
}

func TestFreshDatabaseHasZeroHostRecord(t *testing.T) {
	d := newMemory(t)
	h, err := d.Host(context.Background())
	if err != nil || !reflect.DeepEqual(h, Host{Version: HostVersion}) {
		t.Errorf("Host() = %+v, %v, want the zero record", h, err)
	}
}

// oldHost writes a state dir as osd before schema version 7 left it: the configuration
// keys (written one SetConfig at a time, as main's code did) and the join and netsetup
// files, and returns the database's path.
func oldHost(t *testing.T, conf map[string]string, files map[string]string) string {
	t.Helper()
	ctx := context.Background()
	old, path := openTemp(t, updates[:6])
	for k, v := range conf {
		if err := old.SetConfig(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	old.Close()
	dir := filepath.Dir(path)
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func TestMigrationFoldsOldHostIntoRecord(t *testing.T) {
	ctx := context.Background()
	ext := `{"Bridge":"br-ex","CIDR":"172.24.4.0/24","GatewayIP":"172.24.4.1","Interface":""}`
	extIf := `{"Bridge":"br-ex","CIDR":"","GatewayIP":"","Interface":"eth1"}`
	netExt := "{\n  \"ip_forward_original\": \"0\",\n  \"moved\": {\n    \"interface\": \"eth1\",\n    \"bridge\": \"br-ex\",\n    \"addrs\": [{\"cidr\": \"192.0.2.5/24\"}],\n    \"routes\": null\n  }\n}"
	netTun := "{\n  \"moved\": {\n    \"interface\": \"eth0\",\n    \"bridge\": \"br-tun\",\n    \"addrs\": [],\n    \"routes\": []\n  }\n}"
	joinJSON := `{"state":"member","name":"n2","roles":["compute","network"],"fingerprint":"ab12","addresses":["10.0.0.1:8443","192.0.2.1:8443"],"server":"10.0.0.1:8443","address":"10.0.0.2:8443","k3s_server_url":"https://10.0.0.1:6443","k3s_token":"K10::secret","hostname":"h2"}`
	cases := []struct {
		name  string
		conf  map[string]string
		files map[string]string
		want  Host
	}{
		{"nothing asked", nil, nil, Host{}},
		{"initialized host", map[string]string{
			"init.goal": "openstack", "init.storage_backend": "lvm", "init.storage_size_bytes": "32212254720",
			"init.external_network": extIf, "host.tunnel_interface": "eth0", "init.requested": "true",
			"storage.backend": "lvm", "storage.reason": "asked for with osd init --storage lvm", "storage.size_bytes": "32212254720",
			"host.external_network": extIf, "hypervisor.virt_type": "kvm", "host.ovs_owner": "osd",
		}, map[string]string{"host/netsetup.json": netExt, "host/tunnel/netsetup.json": netTun},
			Host{Initialized: true, Goal: "openstack", TunnelInterface: "eth0",
				ExternalWanted: &Network{Bridge: "br-ex", Interface: "eth1"}, External: &Network{Bridge: "br-ex", Interface: "eth1"},
				Storage:     Storage{Wanted: "lvm", SizeWanted: 32212254720, Backend: "lvm", Reason: "asked for with osd init --storage lvm", Size: 32212254720},
				NetExternal: netExt, NetTunnel: netTun}},
		{"default network, kubernetes only", map[string]string{"init.goal": "kubernetes", "init.requested": "true", "host.external_network": ext,
			"storage.backend": "none", "storage.reason": "no disk", "storage.size_bytes": "0"}, nil,
			Host{Initialized: true, Goal: "kubernetes", External: &Network{Bridge: "br-ex", CIDR: "172.24.4.0/24", GatewayIP: "172.24.4.1"},
				Storage: Storage{Backend: "none", Reason: "no disk"}}},
		{"joined member", map[string]string{"host.tunnel_interface": "auto", "join.state": "member", "host.external_network": ext},
			map[string]string{"cluster/join.json": joinJSON},
			Host{TunnelInterface: "auto", External: &Network{Bridge: "br-ex", CIDR: "172.24.4.0/24", GatewayIP: "172.24.4.1"},
				Join: &Join{State: "member", Name: "n2", Roles: []string{"compute", "network"}, Fingerprint: "ab12",
					Addresses: []string{"10.0.0.1:8443", "192.0.2.1:8443"}, Server: "10.0.0.1:8443", Address: "10.0.0.2:8443",
					K3sURL: "https://10.0.0.1:6443", K3sToken: "K10::secret", Hostname: "h2"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := oldHost(t, c.conf, c.files)
			d, err := Open(ctx, path)
			if err != nil {
				t.Fatalf("Open(old state dir) = %v, want nil", err)
			}
			defer d.Close()
			got, err := d.Host(ctx)
			c.want.Version = HostVersion
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Errorf("Host() = %+v, %v\nwant %+v", got, err, c.want)
			}
			all, _ := d.AllConfig(ctx)
			for _, k := range legacyKeys {
				if v, ok := all[k]; ok {
					t.Errorf("config key %s = %q after the migration, want it folded into the host record", k, v)
				}
			}
			for k, v := range c.conf {
				if !slices.Contains(legacyKeys, k) && all[k] != v {
					t.Errorf("config %s = %q after the migration, want %q kept", k, all[k], v)
				}
			}
			for name := range c.files {
				if _, err := os.Stat(filepath.Join(filepath.Dir(path), name)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s after the migration: %v, want it removed", name, err)
				}
			}
			if _, err := os.Stat(path + ".bak"); err != nil {
				t.Errorf("backup before the migration: %v", err)
			}
		})
	}
}

func TestMigrationRefusesUnreadableJoinFile(t *testing.T) {
	path := oldHost(t, map[string]string{"join.state": "joining"}, map[string]string{"cluster/join.json": "{not json"})
	d, err := Open(context.Background(), path)
	if err == nil {
		d.Close()
		t.Fatal("Open(state dir with a broken join.json) = nil, want an error naming it")
	}
	if !strings.Contains(err.Error(), "join.json") {
		t.Errorf("Open() = %v, want it to name join.json", err)
	}
	if _, serr := os.Stat(filepath.Join(filepath.Dir(path), "cluster", "join.json")); serr != nil {
		t.Errorf("join.json after the refused migration: %v, want it kept", serr)
	}
	old, err := open(context.Background(), path, updates[:6])
	if err != nil {
		t.Fatalf("open at the old schema after the refusal = %v, want it untouched", err)
	}
	defer old.Close()
	if v, ok, _ := old.GetConfig(context.Background(), "join.state"); !ok || v != "joining" {
		t.Errorf("join.state after the refused migration = %q, %v, want it kept", v, ok)
	}
}

// TestMigrationOfRealStateDir migrates a copy of a real host's state dir: set
// OSD_STATE_COPY to a copy (never the live /var/lib/osd: the test copies it once more and
// writes only to its own copy) holding osd.db (with -wal and -shm) at schema version 6
// and the host's cluster/ and host/ directories. The record must hold what the old keys
// and files said, and everything else in the database must be as it was.
func TestMigrationOfRealStateDir(t *testing.T) {
	src := os.Getenv("OSD_STATE_COPY")
	if src == "" {
		t.Skip("set OSD_STATE_COPY to a copy of a real state dir")
	}
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "osd.db")
	old, err := open(ctx, path, updates[:6])
	if err != nil {
		t.Fatalf("open the copy at schema version 6: %v", err)
	}
	before, _ := old.AllConfig(ctx)
	members, _ := old.ListMembers(ctx)
	journal, _ := old.RecentJournal(ctx, 1000)
	old.Close()
	files := map[string]string{}
	for _, f := range legacyFiles {
		if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
			files[f] = string(b)
		}
	}
	t.Logf("old keys: %d, files: %v", len(before), slices.Sorted(maps.Keys(files)))

	d, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("Open(copy) = %v", err)
	}
	defer d.Close()
	h, err := d.Host(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("host record: %+v", h)
	if h.Initialized != (before[legacyInitialized] == "true") || h.Goal != before[legacyGoal] || h.TunnelInterface != before[legacyTunnel] {
		t.Errorf("record %+v, want initialized=%q goal=%q tunnel=%q", h, before[legacyInitialized], before[legacyGoal], before[legacyTunnel])
	}
	if h.Storage.Backend != before[legacyStorageBackend] || h.Storage.Reason != before[legacyStorageReason] || h.Storage.Wanted != before[legacyStorageWanted] {
		t.Errorf("storage %+v, want the old keys' %q %q %q", h.Storage, before[legacyStorageBackend], before[legacyStorageReason], before[legacyStorageWanted])
	}
	if v := before[legacyStorageSize]; v != "" && v != strconv.FormatInt(h.Storage.Size, 10) {
		t.Errorf("storage size %d, want %s", h.Storage.Size, v)
	}
	for key, n := range map[string]*Network{legacyExternal: h.External, legacyExternalWanted: h.ExternalWanted} {
		v, ok := before[key]
		if ok != (n != nil) {
			t.Errorf("%s = %q, %v but the record's network is %+v", key, v, ok, n)
			continue
		}
		if ok {
			var want Network
			json.Unmarshal([]byte(v), &want)
			if *n != want {
				t.Errorf("%s = %s, record %+v", key, v, *n)
			}
		}
	}
	if h.NetExternal != files[legacyNetExternalFile] || h.NetTunnel != files[legacyNetTunnelFile] {
		t.Errorf("netsetup state %q %q, want the files' %q %q", h.NetExternal, h.NetTunnel, files[legacyNetExternalFile], files[legacyNetTunnelFile])
	}
	if _, ok := files[legacyJoinFile]; ok != (h.Join != nil) {
		t.Errorf("join.json present %v, record's join %+v", ok, h.Join)
	}
	after, _ := d.AllConfig(ctx)
	for k, v := range before {
		if slices.Contains(legacyKeys, k) {
			if _, ok := after[k]; ok {
				t.Errorf("key %s still in config after the migration", k)
			}
		} else if after[k] != v {
			t.Errorf("config %s = %q after the migration, want %q", k, after[k], v)
		}
	}
	if ms, _ := d.ListMembers(ctx); !reflect.DeepEqual(ms, members) {
		t.Errorf("members after the migration = %+v, want %+v", ms, members)
	}
	if j, _ := d.RecentJournal(ctx, 1000); len(j) != len(journal) {
		t.Errorf("journal after the migration has %d entries, want %d", len(j), len(journal))
	}
	for f := range files {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after the migration: %v, want removed", f, err)
		}
	}
}
