package storage

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/osdcloud/osd/bootstrap/preflight"
	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/rest"
	"github.com/osdcloud/osd/daemon/state"
	"github.com/osdcloud/osd/daemon/store"
)

const gib = int64(1) << 30

// testState is a state with only its store (in memory): enough for the storage
// decisions, which touch nothing else.
func testState(t *testing.T) *state.State {
	t.Helper()
	db, err := store.OpenMemory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &state.State{DB: db, Cfg: state.Config{StateDir: t.TempDir(), NodeName: "node1", NodeIP: "10.0.0.5"}}
}

func TestDecide(t *testing.T) {
	ctx := context.Background()
	probe := preflight.Decisions{StorageBackend: api.StorageCeph, StorageBackendReason: "no device-mapper"}
	facts := preflight.Facts{DiskFreeBytes: 80 * gib}

	st := testState(t)
	dec := probe
	if err := New(st).Decide(ctx, &dec, facts); err != nil {
		t.Fatal(err)
	}
	if c := New(st).Current(ctx); c != (Choice{Backend: "ceph", Reason: "no device-mapper", Size: 20 * gib}) || dec.StorageBackend != "ceph" {
		t.Errorf("first converge: Current = %+v, decisions %s; want ceph from the probe, a quarter of 80 GiB", c, dec.StorageBackend)
	}
	// Later converges keep what was decided, whatever the probe and the disk say now.
	dec = preflight.Decisions{StorageBackend: api.StorageLVM, StorageBackendReason: "device-mapper loaded"}
	if err := New(st).Decide(ctx, &dec, preflight.Facts{DiskFreeBytes: 8 * gib}); err != nil {
		t.Fatal(err)
	}
	if c := New(st).Current(ctx); c.Backend != "ceph" || c.Size != 20*gib || dec.StorageBackend != "ceph" {
		t.Errorf("second converge: Current = %+v (decisions %s), want ceph and 20 GiB kept", c, dec.StorageBackend)
	}

	// osd init --storage lvm --storage-size 30G: recorded, then used by the converge.
	st = testState(t)
	if err := st.UpdateHost(ctx, func(h *store.Host) error {
		New(nil).RecordRequest(h, api.InitRequest{StorageBackend: "lvm", StorageSize: 30 * gib})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	dec = probe
	if err := New(st).Decide(ctx, &dec, facts); err != nil {
		t.Fatal(err)
	}
	if c := New(st).Current(ctx); c.Backend != "lvm" || c.Size != 30*gib || !strings.Contains(c.Reason, "osd init --storage lvm (the host probe said ceph") {
		t.Errorf("asked for lvm, 30 GiB: Current = %+v", c)
	}

	// Not enough disk for the default: the converge fails with the reason.
	st = testState(t)
	dec = probe
	if err := New(st).Decide(ctx, &dec, preflight.Facts{DiskFreeBytes: 2 * gib}); err == nil || !strings.Contains(err.Error(), "block storage needs at least 4.0 GiB") {
		t.Errorf("Decide(2 GiB free) = %v, want the minimum refused", err)
	}
	if c := New(st).Current(ctx); c.Backend != api.StorageNone || !strings.Contains(c.Reason, "not decided yet") {
		t.Errorf("Current after a refused Decide = %+v, want nothing recorded", c)
	}

	// Before any converge: none, and why.
	if c := New(testState(t)).Current(ctx); c.Backend != api.StorageNone || !strings.Contains(c.Reason, "not decided yet") {
		t.Errorf("Current(fresh) = %+v, want none, not decided yet", c)
	}
}

func TestDecideBackend(t *testing.T) {
	probe := preflight.Decisions{StorageBackend: api.StorageCeph, StorageBackendReason: "no device-mapper"}
	for _, tt := range []struct {
		name           string
		s              store.Storage
		backend, cause string
	}{
		{"probe", store.Storage{}, "ceph", "no device-mapper"},
		{"asked as probed", store.Storage{Wanted: "ceph"}, "ceph", "no device-mapper"},
		{"asked", store.Storage{Wanted: "none"}, "none", "asked for with osd init --storage none (the host probe said ceph: no device-mapper)"},
		{"recorded", store.Storage{Wanted: "none", Backend: "lvm", Reason: "before"}, "lvm", "before"},
	} {
		if b, r := decide(tt.s, probe); b != tt.backend || r != tt.cause {
			t.Errorf("%s: decide(%+v) = %q, %q, want %q, %q", tt.name, tt.s, b, r, tt.backend, tt.cause)
		}
	}
}

func TestRecordRequest(t *testing.T) {
	for _, tt := range []struct {
		req  api.InitRequest
		have store.Storage
		want store.Storage
	}{
		{api.InitRequest{}, store.Storage{Wanted: "lvm", SizeWanted: 5}, store.Storage{Wanted: "lvm", SizeWanted: 5}},
		{api.InitRequest{StorageBackend: "ceph"}, store.Storage{}, store.Storage{Wanted: "ceph"}},
		{api.InitRequest{StorageSize: 7}, store.Storage{Wanted: "lvm", SizeWanted: 5}, store.Storage{Wanted: "lvm", SizeWanted: 7}},
	} {
		h := store.Host{Storage: tt.have}
		New(nil).RecordRequest(&h, tt.req)
		if h.Storage != tt.want {
			t.Errorf("RecordRequest(%+v) on %+v = %+v, want %+v", tt.req, tt.have, h.Storage, tt.want)
		}
	}
}

func TestCheckRequest(t *testing.T) {
	ctx := context.Background()
	st := testState(t)
	probe := func(context.Context) preflight.Decisions {
		return preflight.Decisions{StorageBackend: api.StorageCeph, StorageBackendReason: "no device-mapper"}
	}
	for _, tt := range []struct {
		req  api.InitRequest
		want error
		msg  string
	}{
		{req: api.InitRequest{}},
		{req: api.InitRequest{StorageBackend: "ceph", StorageSize: 5 * gib}},
		{req: api.InitRequest{StorageBackend: "none"}},
		{req: api.InitRequest{StorageBackend: "zfs"}, want: rest.ErrBadRequest, msg: `storage backend "zfs": want ceph, lvm or none`},
		{req: api.InitRequest{StorageBackend: "lvm"}, want: rest.ErrBadRequest, msg: "this host cannot serve LVM volumes: no device-mapper"},
		{req: api.InitRequest{StorageSize: 1 * gib}, want: rest.ErrBadRequest, msg: "below the minimum of 4.0 GiB"},
		{req: api.InitRequest{StorageSize: 1 << 60}, want: rest.ErrBadRequest, msg: "does not fit"},
	} {
		err := New(st).CheckRequest(ctx, tt.req, probe)
		if (tt.want == nil) != (err == nil) || (tt.want != nil && (!errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg))) {
			t.Errorf("CheckRequest(%+v) = %v, want %v %q", tt.req, err, tt.want, tt.msg)
		}
	}
	// After the first init: the backend cannot change, the size cannot shrink.
	dec := preflight.Decisions{StorageBackend: "ceph"}
	if err := New(st).Decide(ctx, &dec, preflight.Facts{DiskFreeBytes: 80 * gib}); err != nil {
		t.Fatal(err)
	}
	if err := New(st).CheckRequest(ctx, api.InitRequest{StorageBackend: "none"}, probe); !errors.Is(err, rest.ErrConflict) || !strings.Contains(err.Error(), "needs osd reset first") {
		t.Errorf("CheckRequest(another backend) = %v, want a conflict", err)
	}
	if err := New(st).CheckRequest(ctx, api.InitRequest{StorageSize: 10 * gib}, probe); !errors.Is(err, rest.ErrBadRequest) || !strings.Contains(err.Error(), "can grow but not shrink") {
		t.Errorf("CheckRequest(smaller) = %v, want refused", err)
	}
	if err := New(st).CheckRequest(ctx, api.InitRequest{StorageBackend: "ceph"}, probe); err != nil {
		t.Errorf("CheckRequest(the same backend again) = %v, want accepted", err)
	}
}

func TestImages(t *testing.T) {
	for backend, want := range map[string]int{api.StorageCeph: 1, api.StorageLVM: 0, api.StorageNone: 0} {
		if got := Images(Choice{Backend: backend}); len(got) != want {
			t.Errorf("Images(%s) = %v, want %d", backend, got, want)
		}
	}
}
