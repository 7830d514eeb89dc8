package images_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/bootstrap/images/bundle"
)

// The airgap bundle of images the real Builder built, in the external test package
// because package bundle imports images. Each builds what the build test before it
// built in the same state, so it finds it cached.

// TestBuildMinimalBundle moves the image of TestBuildMinimalImage through a bundle into
// a fresh state directory.
func TestBuildMinimalBundle(t *testing.T) {
	images.RequireBuildTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r := images.MinimalRecipe(t)
	b := &images.Builder{StateDir: images.BuildState(t)}
	res, err := b.Build(ctx, r)
	if err != nil {
		t.Fatalf("Build(%s) = %v", r.Name, err)
	}
	store, err := b.Store()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "images.bundle")
	t0 := time.Now()
	if _, err := bundle.ExportFile(path, store, r.Name); err != nil {
		t.Fatalf("ExportFile(%s) = %v", r.Name, err)
	}
	exportT := time.Since(t0)
	fresh := &images.Builder{StateDir: t.TempDir()}
	freshStore, err := fresh.Store()
	if err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	imported, err := bundle.Import(path, freshStore)
	if err != nil {
		t.Fatalf("Import(bundle) = %v", err)
	}
	bst, _ := os.Stat(path)
	t.Logf("bundle %.1f MB, export %s, import %s", float64(bst.Size())/1e6, exportT.Round(time.Millisecond), time.Since(t1).Round(time.Millisecond))
	if len(imported) != 1 || imported[0].Digest != res.Digest || imported[0].RecipeHash != r.Hash() || imported[0].Size != res.Size {
		t.Errorf("Import(bundle) = %+v, want %s with digest %s", imported, r.Name, res.Digest)
	}
	list, err := fresh.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.Name == r.Name && (!s.Stored || !s.Cached || s.Digest != res.Digest) {
			t.Errorf("List() after import %s = %+v, want stored, cached, digest %s", r.Name, s, res.Digest)
		}
	}
}

// TestBundleCatalogImages moves every image TestBuildCatalogImages built through a
// bundle into a fresh state directory.
func TestBundleCatalogImages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds (or checks the cached) catalog images for minutes; skipped in -short")
	}
	images.RequireBuildTools(t)
	state, rel, catalog, recipes := images.CatalogState(t)
	b := &images.Builder{StateDir: state, Release: rel, Catalog: catalog}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()
	for _, r := range recipes {
		if _, err := b.Build(ctx, r); err != nil {
			t.Fatalf("Build(%s) = %v", r.Name, err)
		}
	}
	store, _ := b.Store()
	stored, _ := store.List()
	path := filepath.Join(t.TempDir(), "osd-images.bundle")
	t0 := time.Now()
	if _, err := bundle.ExportFile(path, store); err != nil {
		t.Fatalf("ExportFile() = %v", err)
	}
	exportT := time.Since(t0)
	fresh := &images.Builder{StateDir: t.TempDir()}
	fs, err := fresh.Store()
	if err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	if _, err := bundle.Import(path, fs); err != nil {
		t.Fatalf("Import() = %v", err)
	}
	importT := time.Since(t1)
	st, _ := os.Stat(path)
	t.Logf("bundle of %d images: %.1f MB, export %s, import (verify+commit) %s", len(stored), float64(st.Size())/1e6, exportT.Round(time.Millisecond), importT.Round(time.Millisecond))
	got, _ := fs.List()
	if len(got) != len(stored) {
		t.Fatalf("imported %d images, want %d", len(got), len(stored))
	}
	for i := range stored {
		if got[i] != stored[i] {
			t.Errorf("imported %+v, want %+v", got[i], stored[i])
		}
	}
}
