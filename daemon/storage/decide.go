package storage

import (
	"context"
	"fmt"

	"github.com/osdcloud/osd/bootstrap/preflight"
	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/rest"
	"github.com/osdcloud/osd/daemon/store"
)

// Choice is this host's block storage as the first converge decided it.
type Choice struct {
	Backend string // api.StorageCeph, api.StorageLVM or api.StorageNone
	Reason  string // why (the host probe, or osd init --storage)
	Size    int64  // bytes of the OSD's block file or the volume group (0 with none)
}

// Current is the recorded choice (none, "not decided yet", before the first converge).
func (s *Service) Current(ctx context.Context) Choice {
	h, err := s.st.Host(ctx)
	if err != nil || h.Storage.Backend == "" {
		return Choice{Backend: api.StorageNone, Reason: "not decided yet: osd init decides it"}
	}
	return Choice{Backend: h.Storage.Backend, Reason: h.Storage.Reason, Size: h.Storage.Size}
}

// CheckRequest validates osd init's storage choices before anything is recorded or made:
// an unknown backend, lvm on a host that cannot serve it, a change of backend after the
// first init, or a size below the minimum, beyond the free space or smaller than what
// exists is refused with what to do.
func (s *Service) CheckRequest(ctx context.Context, req api.InitRequest, probe func(context.Context) preflight.Decisions) error {
	switch req.StorageBackend {
	case "", api.StorageCeph, api.StorageLVM, api.StorageNone:
	default:
		return rest.Errorf(rest.ErrBadRequest, "storage backend %q: want ceph, lvm or none (or leave it to the host probe)", req.StorageBackend)
	}
	h, err := s.st.Host(ctx)
	if err != nil {
		return err
	}
	have := h.Storage.Backend
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
	free, err := preflight.FreeBytes(s.st.Cfg.StateDir)
	if err != nil {
		return err
	}
	if _, err := preflight.StorageSize(req.StorageSize, free, h.Storage.Size); err != nil {
		return rest.Errorf(rest.ErrBadRequest, "%v", err)
	}
	return nil
}

// RecordRequest puts osd init's storage choices (checked by CheckRequest before) into the
// host record h (pure).
func (*Service) RecordRequest(h *store.Host, req api.InitRequest) {
	if req.StorageBackend != "" {
		h.Storage.Wanted = req.StorageBackend
	}
	if req.StorageSize > 0 {
		h.Storage.SizeWanted = req.StorageSize
	}
}

// Decide records this converge's storage backend and size: the backend once recorded,
// else what osd init asked for, else the probe's choice (dec, updated in place so that
// host preparation follows it), and the size from the free disk (preflight.StorageSize).
func (s *Service) Decide(ctx context.Context, dec *preflight.Decisions, f preflight.Facts) error {
	var backend, reason string
	err := s.st.UpdateHost(ctx, func(h *store.Host) error {
		backend, reason = decide(h.Storage, *dec)
		size, err := h.Storage.Size, error(nil)
		if backend != api.StorageNone {
			if size, err = preflight.StorageSize(h.Storage.SizeWanted, f.DiskFreeBytes, size); err != nil {
				return fmt.Errorf("storage: %w", err)
			}
		}
		h.Storage.Backend, h.Storage.Reason, h.Storage.Size = backend, reason, size
		return nil
	})
	if err != nil {
		return err
	}
	dec.StorageBackend, dec.StorageBackendReason = backend, reason
	return nil
}

// decide is the backend and its reason: the one recorded, else the one asked for, else the
// probe's (pure).
func decide(st store.Storage, dec preflight.Decisions) (string, string) {
	switch {
	case st.Backend != "":
		return st.Backend, st.Reason
	case st.Wanted != "" && st.Wanted != dec.StorageBackend:
		return st.Wanted, "asked for with osd init --storage " + st.Wanted + " (the host probe said " + dec.StorageBackend + ": " + dec.StorageBackendReason + ")"
	}
	return dec.StorageBackend, dec.StorageBackendReason
}

// Images are the service images the recorded backend needs beyond the base deployment's
// (images.Service's more).
func (s *Service) Images(ctx context.Context) []string { return Images(s.Current(ctx)) }

// Images are the service images the backend needs beyond the base deployment's (pure).
func Images(c Choice) []string {
	if c.Backend == api.StorageCeph {
		return []string{"ceph"}
	}
	return nil
}
