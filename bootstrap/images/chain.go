package images

import (
	"fmt"
	"path"

	"github.com/osdcloud/osd/bootstrap/images/oci"
)

// chain returns the recipes r is layered on and r itself, lowest first, looked up in
// catalog (pure). It refuses a base that is missing, not a Debian image, of another
// suite, or a cycle.
func chain(catalog []Recipe, r Recipe) ([]Recipe, error) {
	byName := map[string]Recipe{}
	for _, c := range catalog {
		byName[c.Name] = c
	}
	out := []Recipe{r}
	seen := map[string]bool{r.Name: true}
	for cur := r; cur.Base != ""; {
		b, ok := byName[cur.Base]
		switch {
		case !ok:
			return nil, fmt.Errorf("recipe %s: base image %q is not in the catalog", cur.Name, cur.Base)
		case seen[b.Name]:
			return nil, fmt.Errorf("recipe %s: layered on itself through %s", r.Name, b.Name)
		case b.Kind != KindDebian || cur.Kind != KindDebian:
			return nil, fmt.Errorf("recipe %s: only debian images are layered (base %s is %s)", cur.Name, b.Name, b.Kind)
		case b.Suite != cur.Suite:
			return nil, fmt.Errorf("recipe %s: suite %s differs from its base %s's %s", cur.Name, cur.Suite, b.Name, b.Suite)
		}
		seen[b.Name] = true
		out = append([]Recipe{b}, out...)
		cur = b
	}
	return out, nil
}

// isBase reports whether some catalog recipe is layered on name (its tree is kept for
// the builds on top of it).
func isBase(catalog []Recipe, name string) bool {
	for _, c := range catalog {
		if c.Base == name {
			return true
		}
	}
	return false
}

// chainExcludes is what no layer of the chain packs: oci.RootfsExcludes and every
// recipe's own Exclude (a path a lower layer leaves out stays out above it).
func chainExcludes(ch []Recipe) []string {
	out := append([]string(nil), oci.RootfsExcludes...)
	for _, r := range ch {
		out = append(out, r.Exclude...)
	}
	return out
}

// chainPackages is every package of the chain (what the top image holds).
func chainPackages(ch []Recipe) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range ch {
		for _, p := range r.Packages {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	return out
}

// excludedPath reports whether rel (slash-separated, relative) matches a pattern.
func excludedPath(patterns []string, rel string) bool {
	for _, pat := range patterns {
		if ok, _ := path.Match(pat, rel); ok {
			return true
		}
	}
	return false
}
