package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/daemon/rest"
)

// ImagesRequest names images (all of the catalog when empty) and, for export and import,
// a bundle file on the daemon's host. Force lets an export replace an existing file.
type ImagesRequest struct {
	Names []string `json:"names,omitempty"`
	Path  string   `json:"path,omitempty"`
	Force bool     `json:"force,omitempty"`
}

func (d *Daemon) decodeImages(r *http.Request, needPath bool) (ImagesRequest, error) {
	var req ImagesRequest
	if needPath && r.TLS != nil {
		return req, rest.Errorf(rest.ErrForbidden, "bundle files are read and written on the daemon's host: use the local socket (osd images export/import on that host)")
	}
	if err := rest.DecodeJSON(r, &req, 64<<10); err != nil {
		return req, err
	}
	if _, err := images.Select(req.Names...); err != nil {
		return req, rest.Errorf(rest.ErrBadRequest, "%v: osd images list shows the catalog", err)
	}
	if needPath && (req.Path == "" || !filepath.IsAbs(req.Path)) {
		return req, rest.Errorf(rest.ErrBadRequest, "path %q: want an absolute path of a bundle file", req.Path)
	}
	return req, nil
}

func (d *Daemon) getImages(*http.Request) rest.Response {
	st, err := d.builder().List()
	if err != nil {
		return rest.ErrorResponse(err)
	}
	return rest.SyncResponse(st)
}

// postImagesBuild builds images as an operation that reports each step.
func (d *Daemon) postImagesBuild(r *http.Request) rest.Response {
	req, err := d.decodeImages(r, false)
	if err != nil {
		return rest.ErrorResponse(err)
	}
	if !d.imagesBusy.TryLock() {
		return rest.ErrorResponse(rest.Errorf(rest.ErrConflict, "an image build or import is already running: wait for it (osd images list)"))
	}
	op := d.ops.start(d.runCtx, &d.wg, "images-build", func(ctx context.Context, emit func(string)) (any, error) {
		defer d.imagesBusy.Unlock()
		b := d.builder()
		b.Progress = buildReporter(emit)
		defer func() { b.Progress = nil }()
		res, err := b.BuildAll(ctx, req.Names...)
		for _, x := range res {
			how := "built"
			if x.Cached {
				how = "cached"
			}
			emit(fmt.Sprintf("%s: %s %s (%d MB) in %s", x.Name, how, x.Digest, x.Size>>20, x.Duration.Round(time.Second)))
		}
		return res, err
	})
	return rest.AsyncResponse("/1.0/operations/"+op.ID, op)
}

// buildReporter turns build events into progress lines, at most one a second per image
// and step (plus every step change).
func buildReporter(emit func(string)) func(images.Event) {
	var mu sync.Mutex
	last := map[string]time.Time{}
	lastStep := map[string]string{}
	return func(e images.Event) {
		mu.Lock()
		defer mu.Unlock()
		if lastStep[e.Image] == e.Step && time.Since(last[e.Image]) < time.Second {
			return
		}
		last[e.Image], lastStep[e.Image] = time.Now(), e.Step
		msg := e.Image + ": " + e.Step
		if e.Total > 0 {
			msg += fmt.Sprintf(", %d/%d packages", e.Packages, e.Total)
		}
		if e.MB > 0 {
			msg += fmt.Sprintf(", %.0f MB", e.MB)
		}
		if e.Message != "" {
			msg += ": " + e.Message
		}
		emit(msg)
	}
}

// postImagesExport writes a bundle file on the daemon's host. The destination is checked
// before any work (400 saying what to do); an existing file is replaced only with force.
func (d *Daemon) postImagesExport(r *http.Request) rest.Response {
	req, err := d.decodeImages(r, true)
	if err != nil {
		return rest.ErrorResponse(err)
	}
	st, err := d.builder().Store()
	if err != nil {
		return rest.ErrorResponse(err)
	}
	path, err := images.CheckExportPath(req.Path, req.Force, st.Dir())
	if err != nil {
		return rest.ErrorResponse(rest.Errorf(rest.ErrBadRequest, "%v", err))
	}
	stored, err := images.WriteBundleFile(path, req.Force, st, req.Names...)
	if errors.Is(err, images.ErrBadDestination) || errors.Is(err, images.ErrNotStored) {
		return rest.ErrorResponse(rest.Errorf(rest.ErrBadRequest, "%v", err))
	}
	if err != nil {
		return rest.ErrorResponse(err)
	}
	return rest.SyncResponse(stored)
}

// postImagesImport verifies a bundle and adds its images to the store, and to the
// embedded containerd when it runs.
func (d *Daemon) postImagesImport(r *http.Request) rest.Response {
	req, err := d.decodeImages(r, true)
	if err != nil {
		return rest.ErrorResponse(err)
	}
	if !d.imagesBusy.TryLock() {
		return rest.ErrorResponse(rest.Errorf(rest.ErrConflict, "an image build or import is already running: wait for it"))
	}
	defer d.imagesBusy.Unlock()
	stored, err := d.builder().Import(req.Path)
	if err != nil {
		return rest.ErrorResponse(rest.Errorf(rest.ErrBadRequest, "%v", err))
	}
	if d.containerd != nil {
		var names []string
		for _, s := range stored {
			names = append(names, s.Name)
		}
		if _, err := d.importStored(r.Context(), names...); err != nil {
			return rest.ErrorResponse(fmt.Errorf("bundle verified and stored, but importing into containerd failed: %w", err))
		}
	}
	return rest.SyncResponse(stored)
}
