package oci

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/osdcloud/osd/bootstrap/images/oci/ocitest"
)

func TestDiffLayer(t *testing.T) {
	lower, upper := t.TempDir(), t.TempDir()
	ts := time.Date(2023, 6, 10, 0, 0, 0, 0, time.UTC)
	write := func(root, rel, data string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		os.Chtimes(p, ts, ts)
	}
	for _, root := range []string{lower, upper} {
		write(root, "etc/same", "same", 0o644)
		write(root, "usr/lib/big", string(make([]byte, 200000)), 0o644)
	}
	write(lower, "etc/gone", "gone", 0o644)
	write(lower, "var/old/a", "a", 0o644)
	write(lower, "var/old/sub/b", "b", 0o644)
	write(lower, "etc/content", "aaaa", 0o644)
	write(upper, "etc/content", "bbbb", 0o644) // same size and mtime, other bytes
	write(lower, "etc/mode", "m", 0o644)
	write(upper, "etc/mode", "m", 0o600)
	write(upper, "etc/new", "new", 0o644)
	os.Symlink("same", filepath.Join(lower, "etc/link"))
	os.Symlink("new", filepath.Join(upper, "etc/link"))
	os.MkdirAll(filepath.Join(upper, "var"), 0o755)

	base, err := LayerFromDir(lower, DirOptions{KeepMtimesBefore: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	diff, err := DiffLayer(lower, upper, DirOptions{KeepMtimesBefore: time.Now()})
	if err != nil {
		t.Fatalf("DiffLayer() = %v", err)
	}
	got, order := ocitest.ReadLayerAll(t, diff)
	want := []string{"etc/.wh.gone", "var/.wh.old", "etc/content", "etc/link", "etc/mode", "etc/new"}
	if len(order) != len(want) {
		t.Errorf("DiffLayer() entries = %v, want %v", order, want)
	} else {
		for i := range want {
			if order[i] != want[i] {
				t.Errorf("DiffLayer() entries = %v, want %v", order, want)
				break
			}
		}
	}
	if e := got["etc/content"]; e.Data != "bbbb" {
		t.Errorf("DiffLayer() etc/content = %q, want bbbb", e.Data)
	}
	// Base + diff flattens to exactly the upper tree.
	img, err := ImageFromLayers([]v1.Layer{base, diff}, ImageConfig{})
	if err != nil {
		t.Fatal(err)
	}
	flat, _ := ocitest.ReadTar(t, mutate.Extract(img))
	full, err := LayerFromDir(upper, DirOptions{KeepMtimesBefore: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	direct, _ := ocitest.ReadLayerAll(t, full)
	names := func(m map[string]ocitest.Entry) []string {
		var out []string
		for n := range m {
			out = append(out, filepath.Clean(n))
		}
		sort.Strings(out)
		return out
	}
	gotNames, wantNames := names(flat), names(direct)
	if len(gotNames) != len(wantNames) {
		t.Fatalf("base+diff flattened = %v, want %v", gotNames, wantNames)
	}
	for i := range wantNames {
		if gotNames[i] != wantNames[i] {
			t.Fatalf("base+diff flattened = %v, want %v", gotNames, wantNames)
		}
	}
	for n, w := range direct {
		g := flat[filepath.Clean(n)]
		if g.Data != w.Data || g.Mode != w.Mode || g.Link != w.Link {
			t.Errorf("base+diff %s = %+v, want %+v", n, g, w)
		}
	}
	// Identical trees diff to an empty layer.
	same, err := DiffLayer(upper, upper, DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := ocitest.ReadLayerAll(t, same); len(e) != 0 {
		t.Errorf("DiffLayer(x, x) has %d entries, want 0", len(e))
	}
}
