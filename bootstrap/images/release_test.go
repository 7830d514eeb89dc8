package images

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestReleaseNamed(t *testing.T) {
	for _, tc := range []struct {
		in, name, title, err string
	}{
		{in: "zed", name: "zed", title: "Zed (Debian 12's packages)"},
		{in: "Epoxy", name: "epoxy", title: "2025.1 Epoxy (Debian 13's packages)"},
		{in: " 2025.1 ", name: "epoxy", title: "2025.1 Epoxy (Debian 13's packages)"},
		{in: "caracal", err: `unknown OpenStack release "caracal": osd deploys zed, epoxy`},
		{in: "", err: "unknown OpenStack release"},
	} {
		r, err := ReleaseNamed(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ReleaseNamed(%q) error = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || r.Name != tc.name || r.Title() != tc.title {
			t.Errorf("ReleaseNamed(%q) = %q %q, %v; want %q %q", tc.in, r.Name, r.Title(), err, tc.name, tc.title)
		}
	}
}

// TestRecipesFor checks that each release's catalog builds every Debian image from that
// release's suite, tags it with the release, and keeps the other images as they are.
func TestRecipesFor(t *testing.T) {
	refs := map[string]bool{}
	for _, rel := range Releases() {
		byName := map[string]Recipe{}
		for _, r := range RecipesFor(rel) {
			byName[r.Name] = r
			if r.Kind == KindDebian {
				if r.Suite != rel.Suite {
					t.Errorf("%s: recipe %s suite %s, want %s", rel.Name, r.Name, r.Suite, rel.Suite)
				}
				if r.Name != BaseImage && !strings.HasSuffix(r.Ref, ":"+rel.Name+"-"+rel.Suite) {
					t.Errorf("%s: recipe %s ref %s, want the tag %s-%s", rel.Name, r.Name, r.Ref, rel.Name, rel.Suite)
				}
				if refs[r.Ref] {
					t.Errorf("%s: ref %s is another release's too", rel.Name, r.Ref)
				}
				refs[r.Ref] = true
			}
		}
		if _, err := chain(RecipesFor(rel), byName["openstack"]); err != nil {
			t.Errorf("%s: %v", rel.Name, err)
		}
	}
	def := RecipesFor(DefaultRelease())
	for i, r := range Recipes() {
		if r.Ref != def[i].Ref {
			t.Errorf("Recipes()[%d] = %s, want the default release's %s", i, r.Ref, def[i].Ref)
		}
	}
}

// TestReleaseDirs: Zed's images stay where they were before osd had releases; every other
// release gets a directory of its own, so two releases' images of one name never meet in
// one store, and a builder of a release uses that release's catalog.
func TestReleaseDirs(t *testing.T) {
	epoxy, err := ReleaseNamed(Epoxy)
	if err != nil {
		t.Fatal(err)
	}
	zed, _ := ReleaseNamed(Zed)
	for _, c := range []struct {
		rel  Release
		want string
	}{
		{zed, "/var/cache/osd"},
		{epoxy, "/var/cache/osd/releases/epoxy"},
	} {
		if got := ReleaseDir("/var/cache/osd", c.rel); got != c.want {
			t.Errorf("ReleaseDir(%s) = %s, want %s", c.rel.Name, got, c.want)
		}
	}
	dir := t.TempDir()
	bz, be := &Builder{StateDir: dir}, &Builder{StateDir: dir, Release: epoxy}
	if bz.releaseDir() != ReleaseDir(dir, DefaultRelease()) || be.releaseDir() != filepath.Join(dir, "releases", "epoxy") {
		t.Errorf("release dirs = %s, %s", bz.releaseDir(), be.releaseDir())
	}
	if bz.debCache() == be.debCache() || bz.treeDir("base") == be.treeDir("base") {
		t.Errorf("two releases share a .deb cache or a layer tree: %s %s", bz.debCache(), bz.treeDir("base"))
	}
	zs, err := bz.Store()
	if err != nil {
		t.Fatal(err)
	}
	es, err := be.Store()
	if err != nil {
		t.Fatal(err)
	}
	if zs.Dir() == es.Dir() {
		t.Errorf("two releases share the store %s", zs.Dir())
	}
	for _, r := range be.catalog() {
		if r.Kind == KindDebian && r.Suite != epoxy.Suite {
			t.Errorf("the Epoxy builder's recipe %s is from %s, want %s", r.Name, r.Suite, epoxy.Suite)
		}
	}
	if r, ok := RecipeIn(epoxy, "openstack"); !ok || !strings.HasSuffix(r.Ref, ":epoxy-trixie") {
		t.Errorf("RecipeIn(epoxy, openstack) = %s, %v, want a ref tagged epoxy-trixie", r.Ref, ok)
	}
}

func TestUpgradeTarget(t *testing.T) {
	zed, _ := ReleaseNamed(Zed)
	epoxy, _ := ReleaseNamed(Epoxy)
	def := DefaultRelease()
	// A Zed cloud is behind once the default moved past Zed.
	zedWant, zedOK := "", def.Name != Zed
	if zedOK {
		zedWant = def.Name
	}
	for _, c := range []struct {
		cur    Release
		want   string
		wantOK bool
	}{
		{def, "", false},                   // a cloud on the default has nothing to move to
		{epoxy, "", false},                 // nor one on the newest release
		{Release{Name: "kilo"}, "", false}, // unknown
		{zed, zedWant, zedOK},
	} {
		got, ok := UpgradeTarget(c.cur)
		if ok != c.wantOK || got.Name != c.want {
			t.Errorf("UpgradeTarget(%s) = %q, %v, want %q, %v", c.cur.Name, got.Name, ok, c.want, c.wantOK)
		}
	}
}
