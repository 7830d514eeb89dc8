package storage

import (
	"context"
	"fmt"
	"strconv"

	"github.com/osdcloud/osd/bootstrap/preflight"
	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/rest"
	"github.com/osdcloud/osd/daemon/state"
)

// Choice is this host's block storage as the first converge decided it.
type Choice struct {
	Backend string // api.StorageCeph, api.StorageLVM or api.StorageNone
	Reason  string // why (the host probe, or osd init --storage)
	Size    int64  // bytes of the OSD's block file or the volume group (0 with none)
}

func getInt(ctx context.Context, st *state.State, key state.Key) (int64, error) {
	v, ok, err := st.Get(ctx, key)
	if err != nil || !ok || v == "" {
		return 0, err
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("state %s = %q: %w", key, v, err)
	}
	return n, nil
}

// Current is the recorded choice (none, "not decided yet", before the first converge).
func Current(ctx context.Context, st *state.State) Choice {
	backend, ok, err := st.Get(ctx, state.KeyStorageBackend)
	if err != nil || !ok || backend == "" {
		return Choice{Backend: api.StorageNone, Reason: "not decided yet: osd init decides it"}
	}
	reason, _, _ := st.Get(ctx, state.KeyStorageReason)
	size, _ := getInt(ctx, st, state.KeyStorageSize)
	return Choice{Backend: backend, Reason: reason, Size: size}
}

// CheckRequest validates osd init's storage choices before anything is recorded or made:
// an unknown backend, lvm on a host that cannot serve it, a change of backend after the
// first init, or a size below the minimum, beyond the free space or smaller than what
// exists is refused with what to do.
func CheckRequest(ctx context.Context, st *state.State, req api.InitRequest, probe func(context.Context) preflight.Decisions) error {
	switch req.StorageBackend {
	case "", api.StorageCeph, api.StorageLVM, api.StorageNone:
	default:
		return rest.Errorf(rest.ErrBadRequest, "storage backend %q: want ceph, lvm or none (or leave it to the host probe)", req.StorageBackend)
	}
	have, _, err := st.Get(ctx, state.KeyStorageBackend)
	if err != nil {
		return err
	}
	if req.StorageBackend != "" && have != "" && have != req.StorageBackend {
		return rest.Errorf(rest.ErrConflict, "this cloud's storage backend is %s: changing it to %s needs osd reset first", have, req.StorageBackend)
	}
	if req.StorageBackend == api.StorageLVM && have == "" {
		if dec := probe(ctx); dec.StorageBackend != api.StorageLVM {
			return rest.Errorf(rest.ErrBadRequest, "this host cannot serve LVM volumes: %s", dec.StorageBackendReason)
		}
	}
	if req.StorageSize == 0 {
		return nil
	}
	current, err := getInt(ctx, st, state.KeyStorageSize)
	if err != nil {
		return err
	}
	free, err := preflight.FreeBytes(st.Cfg.StateDir)
	if err != nil {
		return err
	}
	if _, err := preflight.StorageSize(req.StorageSize, free, current); err != nil {
		return rest.Errorf(rest.ErrBadRequest, "%v", err)
	}
	return nil
}

// RecordRequest stores osd init's storage choices (checked by CheckRequest before).
func RecordRequest(ctx context.Context, st *state.State, req api.InitRequest) error {
	if req.StorageBackend != "" {
		if err := st.Set(ctx, state.KeyStorageWanted, req.StorageBackend); err != nil {
			return err
		}
	}
	if req.StorageSize > 0 {
		return st.Set(ctx, state.KeyStorageSizeWanted, strconv.FormatInt(req.StorageSize, 10))
	}
	return nil
}

// Decide records this converge's storage backend and size: the backend once recorded,
// else what osd init asked for, else the probe's choice (dec, updated in place so that
// host preparation follows it), and the size from the free disk (preflight.StorageSize).
func Decide(ctx context.Context, st *state.State, dec *preflight.Decisions, f preflight.Facts) error {
	backend, reason := dec.StorageBackend, dec.StorageBackendReason
	have, _, err := st.Get(ctx, state.KeyStorageBackend)
	if err != nil {
		return err
	}
	want, _, err := st.Get(ctx, state.KeyStorageWanted)
	if err != nil {
		return err
	}
	switch {
	case have != "":
		backend = have
		if reason, _, err = st.Get(ctx, state.KeyStorageReason); err != nil {
			return err
		}
	case want != "" && want != backend:
		backend, reason = want, "asked for with osd init --storage "+want+" (the host probe said "+dec.StorageBackend+": "+dec.StorageBackendReason+")"
	}
	wanted, err := getInt(ctx, st, state.KeyStorageSizeWanted)
	if err != nil {
		return err
	}
	size, err := getInt(ctx, st, state.KeyStorageSize)
	if err != nil {
		return err
	}
	if backend != api.StorageNone {
		if size, err = preflight.StorageSize(wanted, f.DiskFreeBytes, size); err != nil {
			return fmt.Errorf("storage: %w", err)
		}
	}
	for k, v := range map[state.Key]string{state.KeyStorageBackend: backend, state.KeyStorageReason: reason, state.KeyStorageSize: strconv.FormatInt(size, 10)} {
		if err := st.Set(ctx, k, v); err != nil {
			return err
		}
	}
	dec.StorageBackend, dec.StorageBackendReason = backend, reason
	return nil
}

// Images are the service images the backend needs beyond the base deployment's.
func Images(c Choice) []string {
	if c.Backend == api.StorageCeph {
		return []string{"ceph"}
	}
	return nil
}
