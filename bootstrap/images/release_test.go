package images

import (
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
