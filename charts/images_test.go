package charts

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/osdcloud/osd/bootstrap/images"
)

// The tests that look into or run osd's service images get them from osd's own image
// builder, in the cache osd itself uses (OSD_CACHE_DIR, default /var/cache/osd, like
// `osd daemon --cache-dir`). The builder caches by recipe and package versions, so on a
// fresh machine the first test that needs an image builds it (a few minutes each) and
// every later test and package reuses it: the end-to-end suites in test/ find the images
// these tests built. Tests of one package run one at a time here (no t.Parallel), and
// `make test` runs packages one at a time (-p 1), so no two builds share the cache at once.

// cacheDir is osd's cache directory the tests build images into.
func cacheDir() string {
	if d := os.Getenv("OSD_CACHE_DIR"); d != "" {
		return d
	}
	return "/var/cache/osd"
}

// testRelease is the OpenStack release whose Debian packages the tests that run them
// use: OSD_TEST_RELEASE (zed, epoxy), else the default release.
func testRelease(t *testing.T) images.Release {
	t.Helper()
	v := os.Getenv("OSD_TEST_RELEASE")
	if v == "" {
		return images.DefaultRelease()
	}
	rel, err := images.ReleaseNamed(v)
	if err != nil {
		t.Fatalf("OSD_TEST_RELEASE: %v", err)
	}
	return rel
}

// builtOnce records which images this test process has built or checked.
var builtOnce = struct {
	sync.Mutex
	done map[string]bool
}{done: map[string]bool{}}

// catalogImage returns the catalog image called name, as osd's builder makes it now.
func catalogImage(t *testing.T, name string) v1.Image {
	t.Helper()
	r, ok := images.RecipeByName(name)
	if !ok {
		t.Fatalf("no image %s in the catalog", name)
	}
	return builtImage(t, cacheDir(), r)
}

// builtImage builds r with osd's image builder under stateDir (nothing is rebuilt when
// the store holds an image of the same recipe and package versions) and returns it.
// Building needs root and mmdebstrap; without root, an image of the current recipe
// already in the store is used, and the test is skipped only when there is none.
func builtImage(t *testing.T, stateDir string, r images.Recipe) v1.Image {
	t.Helper()
	builtOnce.Lock()
	defer builtOnce.Unlock()
	key := stateDir + "\x00" + r.Name
	b := &images.Builder{StateDir: stateDir, Progress: buildLogger(t)}
	if !builtOnce.done[key] {
		if os.Geteuid() != 0 {
			if st, ok := storedImage(stateDir, r.Name); !ok || st.RecipeHash != r.Hash() {
				t.Skipf("image %s of the current recipe is not in %s, and building it needs root (mmdebstrap --mode=root): run the tests as root", r.Name, stateDir)
			}
		} else {
			if r.Kind == images.KindDebian {
				if _, err := exec.LookPath("mmdebstrap"); err != nil {
					t.Fatalf("building image %s needs mmdebstrap (test/deps.sh installs it): %v", r.Name, err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
			defer cancel()
			res, err := b.Build(ctx, r)
			if err != nil {
				t.Fatalf("build image %s into %s: %v", r.Name, stateDir, err)
			}
			how := "built"
			if res.Cached {
				how = "cached"
			}
			t.Logf("image %s: %s %s (%d MB) in %s", r.Name, how, res.Digest, res.Size>>20, res.Duration.Round(time.Second))
		}
		builtOnce.done[key] = true
	}
	store, err := b.Store()
	if err != nil {
		t.Fatal(err)
	}
	img, _, err := store.Get(r.Name)
	if err != nil {
		t.Fatalf("image %s after building it: %v", r.Name, err)
	}
	return img
}

// storedImage reads what the store under stateDir holds for name, without creating it.
func storedImage(stateDir, name string) (images.Stored, bool) {
	if _, err := os.Stat(filepath.Join(stateDir, "images", "oci", "index.json")); err != nil {
		return images.Stored{}, false
	}
	store, err := images.OpenStore(filepath.Join(stateDir, "images"))
	if err != nil {
		return images.Stored{}, false
	}
	_, st, err := store.Get(name)
	return st, err == nil
}

// buildLogger logs each step of a build once.
func buildLogger(t *testing.T) func(images.Event) {
	var mu sync.Mutex
	last := map[string]string{}
	return func(e images.Event) {
		mu.Lock()
		defer mu.Unlock()
		if last[e.Image] == e.Step {
			return
		}
		last[e.Image] = e.Step
		t.Logf("image %s: %s %s", e.Image, e.Step, e.Message)
	}
}

// whiteoutPrefix marks a layer entry that deletes a lower layer's path; opaqueMarker in a
// directory deletes everything lower layers put in it (OCI image layer specification).
const (
	whiteoutPrefix = ".wh."
	opaqueMarker   = ".wh..wh..opq"
)

// layerPath is a layer entry's path relative to the image root ("" for the root).
func layerPath(name string) string {
	return strings.TrimPrefix(path.Clean("/"+name), "/")
}

// unpackImage writes img's root filesystem into the empty directory dir as a container
// runtime would see it: layers in order; before each layer is written, its whiteouts and
// opaque markers remove what the lower layers put there, and an entry that turns a
// directory into a file (or the reverse) removes the old one; then GNU tar writes the
// layer (--numeric-owner: owners, modes, hard and symbolic links, device nodes as packed).
func unpackImage(t *testing.T, img v1.Image, dir string) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for i, l := range layers {
		if i > 0 { // the first layer has nothing below it
			if err := applyWhiteouts(root, l); err != nil {
				t.Fatalf("layer %d: %v", i, err)
			}
		}
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		x := exec.Command("tar", "-x", "--numeric-owner", "--exclude="+whiteoutPrefix+"*", "-C", dir)
		x.Stdin = rc
		out, err := x.CombinedOutput()
		rc.Close()
		if err != nil {
			t.Fatalf("unpack layer %d of %d: %v\n%s", i+1, len(layers), err, out)
		}
	}
}

// applyWhiteouts removes, under root, what layer l deletes or replaces in lower layers.
func applyWhiteouts(root *os.Root, l v1.Layer) error {
	rc, err := l.Uncompressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		p := layerPath(h.Name)
		dir, base := path.Dir(p), path.Base(p)
		switch {
		case p == "":
		case base == opaqueMarker:
			ents, err := fs.ReadDir(root.FS(), dir)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			for _, e := range ents {
				if err := removeAllIn(root, path.Join(dir, e.Name())); err != nil {
					return err
				}
			}
		case strings.HasPrefix(base, whiteoutPrefix):
			if err := removeAllIn(root, path.Join(dir, strings.TrimPrefix(base, whiteoutPrefix))); err != nil {
				return err
			}
		default:
			fi, err := root.Lstat(p)
			if err == nil && fi.IsDir() != (h.Typeflag == tar.TypeDir) {
				if err := removeAllIn(root, p); err != nil {
					return err
				}
			}
		}
	}
}

// removeAllIn removes name and everything below it, inside root only.
func removeAllIn(root *os.Root, name string) error {
	fi, err := root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		ents, err := fs.ReadDir(root.FS(), name)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if err := removeAllIn(root, path.Join(name, e.Name())); err != nil {
				return err
			}
		}
	}
	return root.Remove(name)
}

// imageTree is an image's file tree as a container sees it: every path (no leading slash)
// with its header from the highest layer that has it, and the content of the files asked
// for.
type imageTree struct {
	headers map[string]*tar.Header
	content map[string][]byte
}

// readImageTree flattens img's layers in order, applying whiteouts and opaque markers,
// and keeps the content of the paths in want.
func readImageTree(t *testing.T, img v1.Image, want ...string) imageTree {
	t.Helper()
	tree := imageTree{headers: map[string]*tar.Header{}, content: map[string][]byte{}}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range layers {
		if err := tree.apply(l, want); err != nil {
			t.Fatalf("read layer %d of %d: %v", i+1, len(layers), err)
		}
	}
	return tree
}

// apply adds one layer: its deletions act on the lower layers only, then its entries.
func (tree imageTree) apply(l v1.Layer, want []string) error {
	rc, err := l.Uncompressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	var deleted, emptied []string // whited-out paths; opaque directories ("" for the root)
	added := map[string]*tar.Header{}
	data := map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		p := layerPath(h.Name)
		dir, base := path.Dir(p), path.Base(p)
		switch {
		case p == "":
			continue
		case base == opaqueMarker:
			if dir == "." {
				dir = ""
			}
			emptied = append(emptied, dir)
			continue
		case strings.HasPrefix(base, whiteoutPrefix):
			deleted = append(deleted, path.Join(dir, strings.TrimPrefix(base, whiteoutPrefix)))
			continue
		}
		added[p] = h
		for _, w := range want {
			if w == p && h.Typeflag == tar.TypeReg {
				if data[p], err = io.ReadAll(tr); err != nil {
					return err
				}
			}
		}
	}
	for p := range tree.headers {
		gone := false
		for _, d := range deleted {
			gone = gone || p == d || strings.HasPrefix(p, d+"/")
		}
		for _, d := range emptied {
			gone = gone || d == "" || strings.HasPrefix(p, d+"/")
		}
		if gone {
			delete(tree.headers, p)
			delete(tree.content, p)
		}
	}
	for p, h := range added {
		if old := tree.headers[p]; old != nil && old.Typeflag == tar.TypeDir && h.Typeflag != tar.TypeDir {
			for q := range tree.headers { // a file replacing a directory hides its children
				if strings.HasPrefix(q, p+"/") {
					delete(tree.headers, q)
					delete(tree.content, q)
				}
			}
		}
		tree.headers[p] = h
		delete(tree.content, p)
	}
	for p, b := range data {
		tree.content[p] = b
	}
	return nil
}

// String summarizes the tree for failure messages.
func (tree imageTree) String() string {
	return fmt.Sprintf("%d paths", len(tree.headers))
}
