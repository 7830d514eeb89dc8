package images

import (
	"reflect"
	"strings"
	"testing"
)

func TestChain(t *testing.T) {
	deb := func(name, base string, pkgs ...string) Recipe {
		return Recipe{Name: name, Ref: "localhost/t/" + name + ":1", Kind: KindDebian, Suite: "bookworm", Base: base, Packages: pkgs}
	}
	cat := []Recipe{
		deb("base", "", "a"), deb("mid", "base", "b", "a"), deb("top", "mid", "c"),
		deb("loop1", "loop2", "x"), deb("loop2", "loop1", "y"), deb("orphan", "missing", "z"),
		{Name: "go", Ref: "localhost/t/go:1", Kind: KindGo}, deb("ongo", "go", "q"),
		{Name: "sid", Ref: "localhost/t/sid:1", Kind: KindDebian, Suite: "sid", Base: "base", Packages: []string{"s"}},
	}
	tests := []struct {
		name    string
		want    []string
		wantErr string
	}{
		{"base", []string{"base"}, ""},
		{"top", []string{"base", "mid", "top"}, ""},
		{"loop1", nil, "layered on itself"},
		{"orphan", nil, "not in the catalog"},
		{"ongo", nil, "only debian images are layered"},
		{"sid", nil, "suite sid differs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := RecipeByNameIn(cat, tt.name)
			ch, err := chain(cat, r)
			var got []string
			for _, c := range ch {
				got = append(got, c.Name)
			}
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("chain(%s) error = %v, want %q", tt.name, err, tt.wantErr)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("chain(%s) = %v, want %v", tt.name, got, tt.want)
			}
		})
	}
	top, _ := RecipeByNameIn(cat, "top")
	ch, _ := chain(cat, top)
	if got := chainPackages(ch); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Errorf("chainPackages(top) = %v, want [a b c]", got)
	}
	if !isBase(cat, "mid") || isBase(cat, "top") {
		t.Errorf("isBase(mid), isBase(top) = %v, %v; want true, false", isBase(cat, "mid"), isBase(cat, "top"))
	}
	if d := dependants(cat); d["base"] != 2 || d["mid"] != 1 || d["top"] != 0 {
		t.Errorf("dependants() = %v, want base 2 (mid, top; sid's chain is invalid), mid 1, top 0", d)
	}
}

func TestBuildOrder(t *testing.T) {
	p := func(name string, kind Kind, weight, pkgs, ordinal int) planned {
		vers := map[string]string{}
		for i := 0; i < pkgs; i++ {
			vers[string(rune('a'+i))] = "1"
		}
		return planned{r: Recipe{Name: name, Kind: kind}, vers: vers, weight: weight, ordinal: ordinal}
	}
	in := []planned{p("pause", KindPause, 0, 0, 0), p("coredns", KindGo, 0, 0, 1), p("base", KindDebian, 8, 5, 2),
		p("common", KindDebian, 2, 9, 3), p("openstack", KindDebian, 0, 20, 4), p("memcached", KindDebian, 0, 6, 5), p("mariadb", KindDebian, 0, 6, 6)}
	var got []string
	for _, x := range buildOrder(in) {
		got = append(got, x.r.Name)
	}
	want := []string{"base", "common", "coredns", "openstack", "memcached", "mariadb", "pause"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("buildOrder() = %v, want %v", got, want)
	}
}

func TestWithBases(t *testing.T) {
	got, err := withBases(Recipes(), []string{"openstack", "memcached"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range got {
		names = append(names, r.Name)
	}
	if want := []string{"base", "openstack-common", "openstack", "memcached"}; !reflect.DeepEqual(names, want) {
		t.Errorf("withBases(openstack, memcached) = %v, want %v", names, want)
	}
	if _, err := withBases(Recipes(), []string{"nope"}); err == nil {
		t.Errorf("withBases(nope) = nil error, want unknown image")
	}
}
