package daemon

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/client"
	"github.com/osdcloud/osd/daemon/cluster"
	"github.com/osdcloud/osd/daemon/rest"
)

// imagesAPI serves the daemon's real router (every endpoint, as on its unix socket) for a
// daemon that has only an image cache in cacheDir, and returns a client on that socket.
// The image endpoints need nothing else (no store, k3s or root).
func imagesAPI(t *testing.T, cacheDir string) *client.Client {
	t.Helper()
	d, err := New(Config{StateDir: t.TempDir(), RunDir: t.TempDir(), CacheDir: cacheDir, NodeName: "node1", Self: "/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	d.wire(context.Background(), nil)
	d.clusterSvc = cluster.New(cluster.Config{}, cluster.NoHooks{})
	sock := filepath.Join(t.TempDir(), "osd.socket")
	l, err := rest.ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rest.Serve(ctx, l, rest.NewRouter(d.endpoints())) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve() = %v", err)
		}
	})
	return client.NewUnix(sock)
}

// tmpEntries lists the names in dir (one level) that look like an export's temporary
// file, for before/after comparisons in directories other processes also change.
func tmpEntries(dir string) string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") || strings.Contains(e.Name(), "bundle") {
			out = append(out, e.Name())
		}
	}
	return strings.Join(out, "\n")
}

// listTree lists every path under dir, for before/after comparisons.
func listTree(t *testing.T, dir string) string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err == nil {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// TestImagesExportDestination calls POST /1.0/images/export through the daemon's router on
// its unix socket: every bad destination is 400 with a message saying what to do, before
// any work (nothing is created, next to it or in it); an existing file is replaced only
// with force. `{"path": "/etc"}` used to write the whole bundle to /.etc.tmp-* and answer
// 500 "file exists".
func TestImagesExportDestination(t *testing.T) {
	cache := t.TempDir()
	store, err := images.OpenStore(filepath.Join(cache, "images"))
	if err != nil {
		t.Fatal(err)
	}
	pause, err := images.PauseImage()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(pause, images.Stored{Name: "pause", Ref: images.PauseRef}); err != nil {
		t.Fatal(err)
	}
	c := imagesAPI(t, cache)
	ctx := context.Background()
	dir := t.TempDir()
	existing := filepath.Join(dir, "old.bundle")
	if err := os.WriteFile(existing, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(existing, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	// A special file of the test's own (never a system one: an export that wrongly
	// accepted /dev/null would replace the host's /dev/null).
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		req  api.ImagesRequest
		want string
	}{
		{"/etc", api.ImagesRequest{Path: "/etc"}, "/etc is a directory: give a file name inside it"},
		{"/etc with force", api.ImagesRequest{Path: "/etc", Force: true}, "/etc is a directory"},
		{"a directory", api.ImagesRequest{Path: dir, Force: true}, "is a directory"},
		{"a trailing slash", api.ImagesRequest{Path: filepath.Join(dir, "new") + "/"}, "names a directory"},
		{"relative", api.ImagesRequest{Path: "osd.bundle"}, "want an absolute path"},
		{"no path", api.ImagesRequest{}, "want an absolute path"},
		{"missing parent", api.ImagesRequest{Path: filepath.Join(dir, "nope", "b.bundle")}, "does not exist: create it first"},
		{"parent is a file", api.ImagesRequest{Path: filepath.Join(existing, "b.bundle")}, "is not a directory"},
		{"existing file", api.ImagesRequest{Path: existing}, "already exists: add --force"},
		{"symbolic link", api.ImagesRequest{Path: filepath.Join(dir, "link"), Force: true}, "is a symbolic link"},
		{"fifo", api.ImagesRequest{Path: filepath.Join(dir, "fifo"), Force: true}, "is a fifo, not a regular file"},
		{"inside the image store", api.ImagesRequest{Path: filepath.Join(cache, "images", "oci", "index.json"), Force: true}, "is inside the image store"},
		{"unknown image", api.ImagesRequest{Path: filepath.Join(dir, "b.bundle"), Names: []string{"nope"}}, `unknown image "nope"`},
		{"image not built", api.ImagesRequest{Path: filepath.Join(dir, "b.bundle"), Names: []string{"memcached"}}, "image memcached is not built (osd images build memcached makes it)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := listTree(t, dir) + tmpEntries("/") + tmpEntries("/etc") + listTree(t, cache)
			err := c.Query(ctx, http.MethodPost, "images/export", tc.req, nil)
			if got := statusOf(err); got != http.StatusBadRequest || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("POST images/export %+v = %v (status %d), want 400 saying %q", tc.req, err, got, tc.want)
			}
			if after := listTree(t, dir) + tmpEntries("/") + tmpEntries("/etc") + listTree(t, cache); after != before {
				t.Errorf("POST images/export %+v created or removed files", tc.req)
			}
		})
	}
	if b, _ := os.ReadFile(existing); string(b) != "old" {
		t.Errorf("existing file = %.40q after refused exports, want it unchanged", b)
	}
	var stored []images.Stored
	if err := c.Query(ctx, http.MethodPost, "images/export", api.ImagesRequest{Path: existing, Force: true}, &stored); err != nil || len(stored) != 1 {
		t.Fatalf("POST images/export to an existing file with force = %v, %v; want pause exported", stored, err)
	}
	fresh := filepath.Join(dir, "new.bundle")
	if err := c.Query(ctx, http.MethodPost, "images/export", api.ImagesRequest{Path: fresh, Names: []string{"pause"}}, &stored); err != nil || len(stored) != 1 {
		t.Fatalf("POST images/export to a new file = %v, %v; want pause exported", stored, err)
	}
	// What was exported imports again through the API (into the same store: same digest).
	if err := c.Query(ctx, http.MethodPost, "images/import", api.ImagesRequest{Path: fresh}, &stored); err != nil || len(stored) != 1 || stored[0].Name != "pause" {
		t.Errorf("POST images/import of the export = %v, %v; want pause", stored, err)
	}
}

// TestImagesImportRefusesBadFiles: import through the API refuses what is not a
// bundle file with 400 and stores nothing.
func TestImagesImportRefusesBadFiles(t *testing.T) {
	cache := t.TempDir()
	c := imagesAPI(t, cache)
	dir := t.TempDir()
	notTar := filepath.Join(dir, "x.bundle")
	if err := os.WriteFile(notTar, []byte(strings.Repeat("not a tar ", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{dir, "is not a regular file"},
		{"/dev/zero", "is not a regular file"},
		{filepath.Join(dir, "missing"), "no such file"},
		{notTar, "corrupt"},
		{"rel.bundle", "want an absolute path"},
	} {
		err := c.Query(context.Background(), http.MethodPost, "images/import", api.ImagesRequest{Path: tc.path}, nil)
		if got := statusOf(err); got != http.StatusBadRequest || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("POST images/import %s = %v (status %d), want 400 saying %q", tc.path, err, got, tc.want)
		}
	}
	var st []images.Status
	if err := c.Query(context.Background(), http.MethodGet, "images", nil, &st); err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Stored {
			t.Errorf("after refused imports, GET images lists %s as stored", s.Name)
		}
	}
}

// TestImagesBuildRefusesUnknownNames: image names reach the builder (which names work
// directories after them) only when they are catalog names; anything else is 400 naming
// it, and no build starts.
func TestImagesBuildRefusesUnknownNames(t *testing.T) {
	cache := t.TempDir()
	c := imagesAPI(t, cache)
	for _, name := range []string{"../../etc", "/tmp/x", "openstack/../compute", "", "OPENSTACK", "memcached\n"} {
		err := c.Query(context.Background(), http.MethodPost, "images/build", api.ImagesRequest{Names: []string{name}}, nil)
		if got := statusOf(err); got != http.StatusBadRequest || !strings.Contains(err.Error(), "unknown image") {
			t.Errorf("POST images/build %q = %v (status %d), want 400 unknown image", name, err, got)
		}
	}
	if ents, _ := os.ReadDir(cache); len(ents) > 1 {
		t.Errorf("cache dir holds %d entries after refused builds, want at most the image store", len(ents))
	}
}
