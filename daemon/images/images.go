// Package images is the daemon's image resource: the catalog and the store (GET
// /1.0/images), builds as operations, airgap bundles (export and import on the daemon's
// host only), and the converge step that makes every image the deployment needs present
// in containerd.
package images

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/osdcloud/osd/bootstrap"
	bimages "github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/bootstrap/images/bundle"
	"github.com/osdcloud/osd/bootstrap/images/ctrimport"
	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/rest"
	"github.com/osdcloud/osd/daemon/state"
)

// DeployImages are the images the services osd deploys run from.
var DeployImages = []string{"coredns", "mariadb", "rabbitmq", "memcached", "openstack", "ovn", "compute"}

// Service is the image resource of one daemon.
type Service struct {
	st *state.State
	// more names the images the deployment needs beyond DeployImages (those of the
	// storage backend).
	more       func(ctx context.Context) []string
	buildersMu sync.Mutex
	builders   map[string]*bimages.Builder // by release
	busy       sync.Mutex                  // one image build or bundle import at a time
	importMu   sync.Mutex                  // one import into containerd at a time

	mu        sync.Mutex
	imp       *importer                // the current image-build's imports
	runs      map[string]*imageProfile // the current run's builds and imports, for the profile
	available map[string]bool          // images in containerd at their stored digest
	working   int                      // image steps running
	lastErr   error                    // how the last image step failed (nil: it did not)
}

// New returns the image resource of st; more names the images the deployment needs beyond
// DeployImages (those of the storage backend: storage.Service's Images).
func New(st *state.State, more func(ctx context.Context) []string) *Service {
	return &Service{st: st, more: more}
}

// Endpoints are the image routes.
func (s *Service) Endpoints() []rest.Endpoint {
	return []rest.Endpoint{
		{Path: "images", Get: rest.Action{Handler: s.getImages}},
		{Path: "images/build", Post: rest.Action{Handler: s.postImagesBuild}},
		{Path: "images/export", Post: rest.Action{Handler: s.postImagesExport}},
		{Path: "images/import", Post: rest.Action{Handler: s.postImagesImport}},
		{Path: "images/blobs/{digest}", Get: rest.Action{Handler: s.getBlob}},
	}
}

// Builder is the image builder of the release this host's cloud runs (state.Release):
// one per release and daemon, shared by init and the API. A release this osd does not
// know in the host record (written by a newer osd) is logged and the default release's
// builder answers: what it builds is never deployed, since the deployment's spec refuses
// that record too.
func (s *Service) Builder() *bimages.Builder {
	rel, err := s.st.Release(context.Background())
	if err != nil {
		slog.Error("the host record's OpenStack release", "err", err)
		rel = bimages.DefaultRelease()
	}
	return s.BuilderFor(rel)
}

// BuilderFor is the daemon's image builder of rel.
func (s *Service) BuilderFor(rel bimages.Release) *bimages.Builder {
	s.buildersMu.Lock()
	defer s.buildersMu.Unlock()
	if b, ok := s.builders[rel.Name]; ok {
		return b
	}
	if s.builders == nil {
		s.builders = map[string]*bimages.Builder{}
	}
	b := &bimages.Builder{StateDir: s.st.Cfg.CacheDir, Release: rel, Log: slog.Default().With("component", "images", "release", rel.Name)}
	s.builders[rel.Name] = b
	return b
}

func (s *Service) decodeImages(r *http.Request, needPath bool) (api.ImagesRequest, error) {
	var req api.ImagesRequest
	if needPath && r.TLS != nil {
		return req, rest.Errorf(rest.ErrForbidden, "bundle files are read and written on the daemon's host: use the local socket (osd images export/import on that host)")
	}
	if err := rest.DecodeJSON(r, &req, 64<<10); err != nil {
		return req, err
	}
	if _, err := bimages.Select(req.Names...); err != nil {
		return req, rest.Errorf(rest.ErrBadRequest, "%v: osd images list shows the catalog", err)
	}
	if needPath && (req.Path == "" || !filepath.IsAbs(req.Path)) {
		return req, rest.Errorf(rest.ErrBadRequest, "path %q: want an absolute path of a bundle file", req.Path)
	}
	return req, nil
}

func (s *Service) getImages(*http.Request) rest.Response {
	st, err := s.Builder().List()
	if err != nil {
		return rest.ErrorResponse(err)
	}
	out := make([]api.ImageStatus, len(st))
	for i, x := range st {
		out[i] = api.ImageStatus{Name: x.Name, Ref: x.Ref, Digest: x.Digest, Size: x.Size, Stored: x.Stored, Cached: x.Cached}
	}
	return rest.SyncResponse(out)
}

// postImagesBuild builds images as an operation that reports each step.
func (s *Service) postImagesBuild(r *http.Request) rest.Response {
	req, err := s.decodeImages(r, false)
	if err != nil {
		return rest.ErrorResponse(err)
	}
	if !s.busy.TryLock() {
		return rest.ErrorResponse(rest.Errorf(rest.ErrConflict, "an image build or import is already running: wait for it (osd images list)"))
	}
	op, _ := s.st.Ops.Start("images-build", false, func(ctx context.Context, emit func(string)) (any, error) {
		defer s.busy.Unlock()
		b := s.Builder()
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
func buildReporter(emit func(string)) func(bimages.Event) {
	var mu sync.Mutex
	last := map[string]time.Time{}
	lastStep := map[string]string{}
	return func(e bimages.Event) {
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
func (s *Service) postImagesExport(r *http.Request) rest.Response {
	req, err := s.decodeImages(r, true)
	if err != nil {
		return rest.ErrorResponse(err)
	}
	st, err := s.Builder().Store()
	if err != nil {
		return rest.ErrorResponse(err)
	}
	path, err := bundle.CheckExportPath(req.Path, req.Force, st.Dir())
	if err != nil {
		return rest.ErrorResponse(rest.Errorf(rest.ErrBadRequest, "%v", err))
	}
	stored, err := bundle.WriteFile(path, req.Force, st, req.Names...)
	if errors.Is(err, bundle.ErrBadDestination) || errors.Is(err, bimages.ErrNotStored) {
		return rest.ErrorResponse(rest.Errorf(rest.ErrBadRequest, "%v", err))
	}
	if err != nil {
		return rest.ErrorResponse(err)
	}
	return rest.SyncResponse(storedImages(stored))
}

// postImagesImport verifies a bundle and adds its images to the store, and to the
// embedded containerd when it runs.
func (s *Service) postImagesImport(r *http.Request) rest.Response {
	req, err := s.decodeImages(r, true)
	if err != nil {
		return rest.ErrorResponse(err)
	}
	if !s.busy.TryLock() {
		return rest.ErrorResponse(rest.Errorf(rest.ErrConflict, "an image build or import is already running: wait for it"))
	}
	defer s.busy.Unlock()
	st, err := s.Builder().Store()
	if err != nil {
		return rest.ErrorResponse(rest.Errorf(rest.ErrBadRequest, "%v", err))
	}
	stored, err := bundle.Import(req.Path, st)
	if err != nil {
		return rest.ErrorResponse(rest.Errorf(rest.ErrBadRequest, "%v", err))
	}
	if s.st.Node.ContainerdRunning() {
		var names []string
		for _, s := range stored {
			names = append(names, s.Name)
		}
		if _, err := s.ImportStored(r.Context(), names...); err != nil {
			return rest.ErrorResponse(fmt.Errorf("bundle verified and stored, but importing into containerd failed: %w", err))
		}
	}
	return rest.SyncResponse(storedImages(stored))
}

// Steps are the converge steps of the images: image-build builds (or finds cached) every
// image the deployment needs, two at a time, from the start of the run (it needs
// nothing: it overlaps the host's preparation and Kubernetes' start), and imports each
// into containerd as soon as it is built and containerd runs; images (after the builds
// and Kubernetes) finishes the imports, so every image is in containerd at its digest.
// detail says what the running step is doing now.
func (s *Service) Steps(detail func(string)) []bootstrap.Step {
	return []bootstrap.Step{
		{Name: "image-build", Run: func(ctx context.Context) (bool, string, error) { return s.buildImages(ctx, detail) }},
		{Name: "images", Needs: []string{"image-build", "kubernetes"}, Run: func(ctx context.Context) (bool, string, error) { return s.importImages(ctx, detail) }},
	}
}

// names are the images the deployment needs: DeployImages and more's.
func (s *Service) names(ctx context.Context) []string {
	return append(append([]string(nil), DeployImages...), s.more(ctx)...)
}

// buildImages is the image-build step.
func (s *Service) buildImages(ctx context.Context, detail func(string)) (changed bool, msg string, err error) {
	s.busy.Lock()
	defer s.busy.Unlock()
	defer s.stepRunning()(&err)
	imp := s.newImporter(ctx)
	names := s.names(ctx)
	b := s.Builder()
	b.Progress = buildReporter(detail)
	b.Built = func(r bimages.Result) {
		s.recordBuild(r)
		if slices.Contains(names, r.Name) {
			imp.add(r.Name)
		}
	}
	// A re-run whose images are all stored does not wait for the package lists'
	// hourly refresh: it happens behind it, and the next run builds what changed.
	b.RefreshLater = true
	defer func() { b.Progress, b.Built, b.RefreshLater = nil, nil, false }()
	results, err := b.BuildAll(ctx, names...)
	imp.close()
	if err != nil {
		return false, "", err
	}
	built := 0
	for _, r := range results {
		if !r.Cached {
			built++
		}
	}
	return built > 0, fmt.Sprintf("%d built, %d cached", built, len(results)-built), nil
}

// importImages is the images step: it waits for the imports the build step queued, then
// imports whatever containerd still lacks at its digest.
func (s *Service) importImages(ctx context.Context, detail func(string)) (changed bool, msg string, err error) {
	defer s.stepRunning()(&err)
	s.mu.Lock()
	imp := s.imp
	s.mu.Unlock()
	early := 0
	if imp != nil {
		detail("importing the images into containerd as they are built")
		n, err := imp.wait(ctx)
		if err != nil {
			slog.Warn("import while building failed; importing again", "err", err)
		}
		early = n
	}
	names := s.names(ctx)
	imported, err := s.ImportStored(ctx, names...)
	if err != nil {
		return early > 0, "", err
	}
	n := early + len(imported)
	return n > 0, fmt.Sprintf("%d imported into containerd (%d while building), %d there already", n, early, len(names)-n), nil
}

// ImportStored imports the named stored images whose digest containerd does not have,
// one by one (the import of each is timed for the profile).
func (s *Service) ImportStored(ctx context.Context, names ...string) ([]string, error) {
	s.importMu.Lock()
	defer s.importMu.Unlock()
	store, err := s.Builder().Store()
	if err != nil {
		return nil, err
	}
	cfg := s.st.Cfg.K3s()
	sock := cfg.ContainerdSocket()
	opts := ctrimport.Options{ContentDir: filepath.Join(cfg.ContainerdRoot(), "io.containerd.content.v1.content"), BlobPath: store.BlobPath}
	var imported []string
	for _, n := range names {
		img, st, err := store.Get(n)
		if err != nil {
			return imported, fmt.Errorf("image %s: %w", n, err)
		}
		have, err := ctrimport.Imported(ctx, sock, st.Ref, st.Digest)
		if err != nil {
			return imported, err
		}
		if have {
			s.setAvailable(n, true)
			continue
		}
		t0 := time.Now()
		if err := ctrimport.ImportMany(ctx, sock, map[string]v1.Image{st.Ref: img}, opts); err != nil {
			return imported, err
		}
		s.recordImport(n, t0, time.Now())
		s.setAvailable(n, true)
		imported = append(imported, st.Ref)
	}
	sort.Strings(imported)
	return imported, nil
}

// stepRunning counts an image step as running until the returned function is called with
// its error, which it records.
func (s *Service) stepRunning() func(*error) {
	s.mu.Lock()
	s.working++
	s.lastErr = nil
	s.mu.Unlock()
	return func(err *error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.working--
		if *err != nil {
			s.lastErr = *err
		}
	}
}

func (s *Service) setAvailable(name string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.available == nil {
		s.available = map[string]bool{}
	}
	s.available[name] = ok
}

// Wait says why the deployment cannot use image name yet ("" when it is in containerd
// at its stored digest).
func (s *Service) Wait(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.available[name]:
		return ""
	case s.lastErr != nil && s.working == 0:
		return "image " + name + " could not be built or imported: " + s.lastErr.Error()
	case s.runs[name] != nil:
		return "waiting for image " + name + " to be imported into containerd"
	default:
		return "waiting for image " + name + " to be built"
	}
}

// Failed is why the images could not be made ready, while no image step runs to retry
// (nil otherwise).
func (s *Service) Failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.working > 0 {
		return nil
	}
	return s.lastErr
}

func storedImages(st []bimages.Stored) []api.StoredImage {
	out := make([]api.StoredImage, len(st))
	for i, x := range st {
		out[i] = api.StoredImage{Name: x.Name, Ref: x.Ref, Digest: x.Digest, Size: x.Size, RecipeHash: x.RecipeHash, CacheKey: x.CacheKey}
	}
	return out
}
