package images

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/osdcloud/osd/bootstrap/images/oci"
)

// layeredCatalog is the catalog's structure in small: a root, a shared middle layer
// and two images on it, and an image straight on the root.
func layeredCatalog() []Recipe {
	deb := func(name, base string, pkgs ...string) Recipe {
		return Recipe{Name: name, Ref: "localhost/osd-test/" + name + ":1", Kind: KindDebian, Suite: DefaultSuite, Base: base, Packages: pkgs,
			Cmd: []string{"/bin/sh"}}
	}
	root := deb("root", "", "netbase")
	root.Variant = defaultVariant
	svc := deb("svc", "mid", "memcached")
	svc.Users = []User{{Name: "memcache", UID: UIDMemcache, GID: UIDMemcache, Home: "/nonexistent", Shell: "/bin/false"}}
	return []Recipe{root, deb("mid", "root", "libevent-2.1-7"), svc, deb("other", "mid", "procps"), deb("side", "root", "less")}
}

func layerDigests(t *testing.T, s *Store, name string) []string {
	t.Helper()
	img, _, err := s.Get(name)
	if err != nil {
		t.Fatalf("Store.Get(%s) = %v", name, err)
	}
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range ls {
		out = append(out, layerDigest(t, l))
	}
	return out
}

// TestRebuildOnlyTopLayer builds a layered catalog, changes one image's recipe and
// builds again: only that image's own layer is rebuilt (the layers below keep their
// digests, the other images stay cached), and the images keep their layers in order.
// It then drops the kept tree of the middle layer and changes the recipe again: the
// build unpacks the tree from the stored image and still rebuilds only the top.
func TestRebuildOnlyTopLayer(t *testing.T) {
	requireBuildTools(t)
	cat := layeredCatalog()
	b := &Builder{StateDir: t.TempDir(), Catalog: cat}
	defer func() {
		if err := removeTree(b.StateDir); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	first, err := b.BuildAll(ctx)
	if err != nil {
		t.Fatalf("BuildAll() = %v", err)
	}
	if len(first) != len(cat) {
		t.Fatalf("BuildAll() built %d images, want %d", len(first), len(cat))
	}
	for _, r := range first {
		t.Logf("%s: %s in %s, steps %v", r.Name, r.Digest, r.Duration.Round(time.Millisecond), stepSummary(r.Steps))
		if r.Cached {
			t.Errorf("first BuildAll() %s cached, want built", r.Name)
		}
	}
	store, _ := b.Store()
	before := map[string][]string{}
	for _, r := range cat {
		before[r.Name] = layerDigests(t, store, r.Name)
	}
	if got := len(before["svc"]); got != 3 {
		t.Fatalf("svc has %d layers, want 3 (root, mid, svc)", got)
	}
	if before["svc"][1] != before["other"][1] || before["svc"][0] != before["side"][0] {
		t.Errorf("shared layers differ: svc %v, other %v, side %v", before["svc"], before["other"], before["side"])
	}

	for round, dropTree := range []bool{false, true} {
		if dropTree {
			if err := removeTree(b.treeDir("mid")); err != nil {
				t.Fatal(err)
			}
		}
		// Change svc's recipe: a file more.
		svc := &cat[2]
		svc.Files = append(slices.DeleteFunc(svc.Files, func(f File) bool { return f.Path == "etc/osd-test-round" }),
			File{Path: "etc/osd-test-round", Mode: 0o644, Data: []byte{byte('0' + round)}})
		b.Catalog = cat
		t0 := time.Now()
		again, err := b.BuildAll(ctx, "svc", "other", "side")
		if err != nil {
			t.Fatalf("BuildAll() after changing svc = %v", err)
		}
		t.Logf("round %d (kept tree dropped: %v): rebuilt in %s", round+1, dropTree, time.Since(t0).Round(time.Millisecond))
		for _, r := range again {
			if want := r.Name == "svc"; r.Cached == want {
				t.Errorf("after changing svc, %s cached = %v, want %v", r.Name, r.Cached, !want)
			}
		}
		after := layerDigests(t, store, "svc")
		if len(after) != 3 || after[0] != before["svc"][0] || after[1] != before["svc"][1] {
			t.Errorf("svc layers %v after the change, want the lower two of %v kept", after, before["svc"])
		}
		if after[2] == before["svc"][2] {
			t.Errorf("svc's own layer %s unchanged, want a new one", after[2])
		}
		img, _, _ := store.Get("svc")
		ls, _ := img.Layers()
		if got, ok := layerFile(t, ls[2], "etc/osd-test-round"); !ok || got != string(rune('0'+round)) {
			t.Errorf("svc's own layer etc/osd-test-round = %q, %v; want %q", got, ok, string(rune('0'+round)))
		}
		before["svc"] = after
	}
	checkUnpacked(t, store)
}

// checkUnpacked unpacks svc (three layers) and checks what each layer contributed is
// there, with the owners and modes the packages gave it.
func checkUnpacked(t *testing.T, store *Store) {
	t.Helper()
	img, _, err := store.Get("svc")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := oci.UnpackImage(img, dir); err != nil {
		t.Fatalf("oci.UnpackImage(svc) = %v", err)
	}
	for _, p := range []string{"etc/services", "usr/bin/memcached", "usr/lib/x86_64-linux-gnu/libevent-2.1.so.7", "bin/sh"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("unpacked svc lacks %s: %v", p, err)
		}
	}
	passwd, _ := os.ReadFile(filepath.Join(dir, "etc/passwd"))
	if !strings.Contains(string(passwd), "memcache:x:912:912:") {
		t.Errorf("unpacked svc etc/passwd lacks memcache:x:912:912:")
	}
	st, err := os.Stat(filepath.Join(dir, "usr/bin/passwd"))
	if err != nil || st.Mode()&os.ModeSetuid == 0 {
		t.Errorf("unpacked usr/bin/passwd = %v, %v; want setuid", st, err)
	}
}

func stepSummary(steps []StepTime) string {
	var parts []string
	for _, s := range steps {
		parts = append(parts, s.Step+" "+s.Duration.Round(10*time.Millisecond).String())
	}
	return strings.Join(parts, ", ")
}
