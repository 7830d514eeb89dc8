package oci

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/osdcloud/osd/bootstrap/images/oci/ocitest"
)

// listTree returns every path under root (directories with a trailing /).
func listTree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if fi.IsDir() {
			rel += "/"
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// TestOverlayLayerRoundTrip packs an overlayfs upper directory (a whiteout, an opaque
// directory, a new file) into a layer and extracts it both ways: as an overlay lower
// directory (the same whiteout marks) and applied over a lower tree (what the marks
// delete is gone).
func TestOverlayLayerRoundTrip(t *testing.T) {
	requireRoot(t)
	upper := t.TempDir()
	ocitest.MkTree(t, upper, map[string]string{"etc/new.conf": "new", "opq/kept": "k", "keep/": ""})
	if err := unix.Mknod(filepath.Join(upper, "etc/gone"), unix.S_IFCHR|0o600, 0); err != nil {
		t.Fatal(err)
	}
	if err := unix.Lsetxattr(filepath.Join(upper, "opq"), overlayOpaque, []byte("y"), 0); err != nil {
		t.Skipf("trusted xattrs unsupported here: %v", err)
	}
	layer, err := LayerFromDir(upper, DirOptions{Overlay: true})
	if err != nil {
		t.Fatalf("LayerFromDir(overlay) = %v", err)
	}
	got, order := ocitest.ReadLayerAll(t, layer)
	for _, want := range []string{"etc/.wh.gone", "opq/.wh..wh..opq", "etc/new.conf", "opq/kept"} {
		if _, ok := got[want]; !ok {
			t.Errorf("layer lacks %s (has %v)", want, order)
		}
	}
	if _, ok := got["etc/gone"]; ok {
		t.Errorf("layer packs the whiteout device etc/gone itself")
	}
	for name, e := range got {
		for k := range e.Xattrs {
			if bytes.HasPrefix([]byte(k), []byte(overlayXattrPrefix)) {
				t.Errorf("layer entry %s carries overlayfs' attribute %s", name, k)
			}
		}
	}

	t.Run("as overlay lower directory", func(t *testing.T) {
		dir := t.TempDir()
		rc, _ := layer.Uncompressed()
		defer rc.Close()
		if err := ExtractLayer(rc, dir, OverlayWhiteouts); err != nil {
			t.Fatalf("ExtractLayer(overlay) = %v", err)
		}
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(dir, "etc/gone"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
			t.Errorf("etc/gone = mode %o rdev %d, %v; want a 0/0 character device", st.Mode, st.Rdev, err)
		}
		v := make([]byte, 1)
		if !lgetxattrOK(filepath.Join(dir, "opq"), overlayOpaque, v) || v[0] != 'y' {
			t.Errorf("opq lacks %s=y", overlayOpaque)
		}
		// Packing the extracted tree gives the same layer.
		again, err := LayerFromDir(dir, DirOptions{Overlay: true})
		if err != nil {
			t.Fatal(err)
		}
		if ocitest.Digest(t, again) != ocitest.Digest(t, layer) {
			t.Errorf("repacked layer %s, want %s", ocitest.Digest(t, again), ocitest.Digest(t, layer))
		}
	})

	t.Run("applied over a lower tree", func(t *testing.T) {
		dir := t.TempDir()
		ocitest.MkTree(t, dir, map[string]string{"etc/gone": "old", "etc/stays": "s", "opq/old": "o", "opq/sub/x": "x"})
		rc, _ := layer.Uncompressed()
		defer rc.Close()
		if err := ExtractLayer(rc, dir, ApplyWhiteouts); err != nil {
			t.Fatalf("ExtractLayer(apply) = %v", err)
		}
		want := []string{"etc/", "etc/new.conf", "etc/stays", "keep/", "opq/", "opq/kept"}
		if got := listTree(t, dir); !reflect.DeepEqual(got, want) {
			t.Errorf("tree after applying = %v, want %v", got, want)
		}
	})
}

// TestExtractLayerKeepsMetadata extracts a layer packed from a tree with owners, modes,
// a hard link, a symlink and a device node and packs the result again: same layer.
func TestExtractLayerKeepsMetadata(t *testing.T) {
	requireRoot(t)
	src := t.TempDir()
	ocitest.MkTree(t, src, map[string]string{"usr/bin/tool": "ELF", "var/lib/svc/": ""})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Chmod(filepath.Join(src, "usr/bin/tool"), 0o4755))
	must(os.Chown(filepath.Join(src, "var/lib/svc"), 912, 912))
	must(os.Chmod(filepath.Join(src, "var/lib/svc"), 0o750))
	must(os.Link(filepath.Join(src, "usr/bin/tool"), filepath.Join(src, "usr/bin/tool2")))
	must(os.Symlink("tool", filepath.Join(src, "usr/bin/alias")))
	must(unix.Mknod(filepath.Join(src, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	must(unix.Chmod(filepath.Join(src, "null"), 0o666))
	layer, err := LayerFromDir(src, DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	rc, _ := layer.Uncompressed()
	defer rc.Close()
	if err := ExtractLayer(rc, dst, ApplyWhiteouts); err != nil {
		t.Fatalf("ExtractLayer() = %v", err)
	}
	again, err := LayerFromDir(dst, DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := ocitest.ReadLayerAll(t, layer)
	b, _ := ocitest.ReadLayerAll(t, again)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("extracted and packed again = %v, want %v", b, a)
	}
}
