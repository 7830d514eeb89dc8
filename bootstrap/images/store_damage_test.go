package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The image store after a crash (or a failing disk): what a build finds damaged in the
// cache is detected, dropped and built again, never used. Each case builds the pause
// image with the real Builder into a temporary cache, damages one file the way a crash
// of code that wrote in place would, and builds again with a new Builder (a new daemon
// process: nothing remembered).

// storeFiles are the pause image's files in a store: index.json and its blobs by role.
type storeFiles struct {
	index, manifest, config, layer string
}

func pauseFiles(t *testing.T, s *Store) storeFiles {
	t.Helper()
	img, _, err := s.Get("pause")
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	return storeFiles{index: filepath.Join(s.Dir(), "oci", "index.json"), manifest: s.blobFile(d), config: s.blobFile(m.Config.Digest), layer: s.blobFile(m.Layers[0].Digest)}
}

func truncateHalf(t *testing.T, p string) {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, st.Size()/2); err != nil {
		t.Fatal(err)
	}
}

func flipByte(t *testing.T, p string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x55
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// fileDigestOK says whether the blob file p holds the content its name says.
func fileDigestOK(p string) bool {
	b, err := os.ReadFile(p)
	if err != nil {
		return false
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]) == filepath.Base(p)
}

func TestBuildRebuildsDamagedStore(t *testing.T) {
	pause, ok := RecipeByName("pause")
	if !ok {
		t.Fatal("no pause recipe")
	}
	cases := []struct {
		name      string
		damage    func(t *testing.T, f storeFiles)
		indexKept bool // index.json moved aside to index.json.corrupt
	}{
		{"layer truncated", func(t *testing.T, f storeFiles) { truncateHalf(t, f.layer) }, false},
		{"layer corrupt, same size", func(t *testing.T, f storeFiles) { flipByte(t, f.layer) }, false},
		{"layer missing", func(t *testing.T, f storeFiles) { os.Remove(f.layer) }, false},
		{"layer empty", func(t *testing.T, f storeFiles) { os.Truncate(f.layer, 0) }, false},
		{"config truncated", func(t *testing.T, f storeFiles) { truncateHalf(t, f.config) }, false},
		{"config corrupt, same size", func(t *testing.T, f storeFiles) { flipByte(t, f.config) }, false},
		{"manifest truncated", func(t *testing.T, f storeFiles) { truncateHalf(t, f.manifest) }, false},
		{"manifest corrupt, same size", func(t *testing.T, f storeFiles) { flipByte(t, f.manifest) }, false},
		{"index.json truncated", func(t *testing.T, f storeFiles) { truncateHalf(t, f.index) }, true},
		{"index.json empty", func(t *testing.T, f storeFiles) { os.Truncate(f.index, 0) }, true},
		{"index.json not an index", func(t *testing.T, f storeFiles) {
			os.WriteFile(f.index, []byte(`{"schemaVersion":2,"manifests":[{"digest":"sha256:12"}]}`), 0o644)
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			state := t.TempDir()
			first := &Builder{StateDir: state}
			res, err := first.Build(ctx, pause)
			if err != nil || res.Cached {
				t.Fatalf("first Build(pause) = cached %v, %v; want built", res.Cached, err)
			}
			s1, _ := first.Store()
			files := pauseFiles(t, s1)
			tc.damage(t, files)

			again := &Builder{StateDir: state} // a new process: nothing verified yet
			res, err = again.Build(ctx, pause)
			if err != nil {
				t.Fatalf("Build(pause) on a damaged store = %v, want it built again", err)
			}
			if res.Cached {
				t.Fatalf("Build(pause) on a damaged store = cached (the damaged image was used), want built again")
			}
			for _, p := range []string{files.manifest, files.config, files.layer} {
				if !fileDigestOK(p) {
					t.Errorf("after the rebuild, blob %s does not hold its digest's content", filepath.Base(p))
				}
			}
			_, kerr := os.Stat(files.index + ".corrupt")
			if got := kerr == nil; got != tc.indexKept {
				t.Errorf("index.json.corrupt kept = %v, want %v", got, tc.indexKept)
			}
			// And the rebuilt image is whole: a third process finds it cached.
			res, err = (&Builder{StateDir: state}).Build(ctx, pause)
			if err != nil || !res.Cached {
				t.Errorf("Build(pause) after the rebuild = cached %v, %v; want cached", res.Cached, err)
			}
		})
	}
}

// TestFetchReplacesDamagedBlob: a member that holds a blob of the right size but wrong
// content downloads it again instead of reusing it.
func TestFetchReplacesDamagedBlob(t *testing.T) {
	src, stored := servingStore(t)
	dst, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := dst.Fetch(ctx, &storeSource{st: src, broken: map[string]bool{}}, stored); err != nil {
		t.Fatal(err)
	}
	img, _, _ := dst.Get("compute")
	m, _ := img.Manifest()
	layer := dst.blobFile(m.Layers[0].Digest)
	flipByte(t, layer)
	// Fetched under another name, so Fetch does not stop at "already held" (Get would
	// catch the damage there): the held blob itself must not be trusted.
	fresh, _ := OpenStore(dst.Dir())
	stored.Name = "compute2"
	res, err := fresh.Fetch(ctx, &storeSource{st: src, broken: map[string]bool{}}, stored)
	if err != nil {
		t.Fatal(err)
	}
	if res.Blobs < 1 || !fileDigestOK(layer) {
		t.Errorf("Fetch over a damaged held layer = %+v, layer intact %v; want the layer downloaded again", res, fileDigestOK(layer))
	}
	if _, _, err := fresh.Get("compute2"); err != nil {
		t.Errorf("Get(compute2) after the fetch = %v", err)
	}
}

// TestServedBlobRefusesDamage: a node does not serve a damaged blob to members.
func TestServedBlobRefusesDamage(t *testing.T) {
	src, _ := servingStore(t)
	img, _, _ := src.Get("compute")
	m, _ := img.Manifest()
	flipByte(t, src.blobFile(m.Layers[0].Digest))
	fresh, _ := OpenStore(src.Dir())
	if _, _, err := fresh.ServedBlob(m.Layers[0].Digest.String()); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("ServedBlob(damaged layer) = %v, want an error saying it is corrupt", err)
	}
}

// TestStoreLeavesNoPartialFiles: blobs and index.json are written through temporary
// files; none is left behind, and a leftover of a crash is removed at open.
func TestStoreLeavesNoPartialFiles(t *testing.T) {
	s := smallStore(t)
	left := filepath.Join(s.incomingDir(), strings.Repeat("0", 64)+".tmp-123")
	os.MkdirAll(s.incomingDir(), 0o755)
	if err := os.WriteFile(left, []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStore(s.Dir()); err != nil {
		t.Fatal(err)
	}
	var found []string
	filepath.Walk(s.Dir(), func(p string, fi os.FileInfo, err error) error {
		if err == nil && strings.Contains(filepath.Base(p), ".tmp") {
			found = append(found, p)
		}
		return nil
	})
	if len(found) > 0 {
		t.Errorf("temporary files left in the store: %v", found)
	}
}
