package images

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/osdcloud/osd/bootstrap/images/oci"
	"github.com/osdcloud/osd/bootstrap/images/oci/ocitest"
)

// TestLayerTimes: after layerTimes, every entry of a tree carries the time stamp its
// layer gives it (whole seconds when older than the build, else the epoch), and the
// layer packed from the tree is unchanged. A kept tree with the real times of its build
// made the layers built on it differ from build to build (copied-up directories and
// files kept them).
func TestLayerTimes(t *testing.T) {
	dir := t.TempDir()
	ocitest.MkTree(t, dir, map[string]string{"usr/": "", "usr/old": "o", "var/lib/new": "n"})
	if err := os.Symlink("old", filepath.Join(dir, "usr/link")); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2023, 5, 1, 12, 0, 0, 123456789, time.UTC)
	for _, p := range []string{"usr", "usr/old"} {
		if err := os.Chtimes(filepath.Join(dir, p), old, old); err != nil {
			t.Fatal(err)
		}
	}
	before := time.Now().Add(-time.Hour) // usr and usr/old are older; the rest was "built"
	opts := oci.DirOptions{KeepMtimesBefore: before}
	packed, err := oci.LayerFromDir(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := layerTimes(dir, before); err != nil {
		t.Fatalf("layerTimes() = %v", err)
	}
	again, err := oci.LayerFromDir(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if layerDigest(t, again) != layerDigest(t, packed) {
		t.Errorf("layer after layerTimes %s, want %s (unchanged)", layerDigest(t, again), layerDigest(t, packed))
	}
	rc, err := packed.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	n := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(dir, h.Name), &st); err != nil {
			t.Fatal(err)
		}
		if got := time.Unix(st.Mtim.Sec, st.Mtim.Nsec); !got.Equal(h.ModTime) {
			t.Errorf("%s in the tree: mtime %s, want the layer's %s", h.Name, got.UTC(), h.ModTime.UTC())
		}
		n++
	}
	if n < 6 {
		t.Errorf("layer has %d entries, want the tree's 6", n)
	}
}
