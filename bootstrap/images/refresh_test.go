package images

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestAllCached(t *testing.T) {
	for _, tc := range []struct {
		plan []planned
		want bool
	}{
		{nil, true},
		{[]planned{{cached: true}, {cached: true}}, true},
		{[]planned{{cached: true}, {cached: false}}, false},
		{[]planned{{cached: false}}, false},
	} {
		if got := allCached(tc.plan); got != tc.want {
			t.Errorf("allCached(%+v) = %v, want %v", tc.plan, got, tc.want)
		}
	}
}

// TestRefreshLater: with the package lists past their age, BuildAll refreshes them before
// answering; with RefreshLater and every image stored it answers first and refreshes them
// in the background; with RefreshLater and an image to build it refreshes them first.
// Real apt-get against the host's sources, in the package's shared build state.
func TestRefreshLater(t *testing.T) {
	requireBuildTools(t)
	state := buildState(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	r := minimalRecipe(t)
	if _, err := (&Builder{StateDir: state}).BuildAll(ctx, r.Name); err != nil { // cached after TestBuildMinimalImage
		t.Fatalf("BuildAll(%s) = %v", r.Name, err)
	}
	apt, err := (&Builder{StateDir: state}).aptDir(r.Suite)
	if err != nil {
		t.Fatal(err)
	}
	stamp := filepath.Join(apt.Dir, "updated")
	age := func() time.Time {
		old := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
		if err := os.Chtimes(stamp, old, old); err != nil {
			t.Fatal(err)
		}
		return old
	}
	refreshed := func(old time.Time) bool {
		st, err := os.Stat(stamp)
		if err != nil {
			t.Fatal(err)
		}
		return st.ModTime().After(old)
	}
	build := func(b *Builder, names ...string) ([]Result, time.Duration) {
		t.Helper()
		t0 := time.Now()
		res, err := b.BuildAll(ctx, names...)
		if err != nil {
			t.Fatalf("BuildAll(%v) = %v", names, err)
		}
		return res, time.Since(t0)
	}

	old := age()
	res, took := build(&Builder{StateDir: state}, r.Name)
	if !refreshed(old) {
		t.Errorf("BuildAll without RefreshLater answered with the lists 2 hours old, want them refreshed first")
	}
	t.Logf("stale lists, refreshed before the answer: %s", took.Round(time.Millisecond))
	for _, x := range res {
		if !x.Cached {
			t.Errorf("%s built again, want cached", x.Name)
		}
	}

	old = age()
	b := &Builder{StateDir: state, RefreshLater: true}
	res, took = build(b, r.Name)
	if refreshed(old) {
		t.Errorf("BuildAll with RefreshLater and every image stored refreshed the lists before answering, want it to answer first")
	}
	for _, x := range res {
		if !x.Cached {
			t.Errorf("%s built again, want cached", x.Name)
		}
	}
	t0 := time.Now()
	b.WaitRefresh()
	if !refreshed(old) {
		t.Errorf("the lists were not refreshed in the background after BuildAll used them stale")
	}
	t.Logf("stale lists, every image stored: answered in %s, the lists refreshed %s later", took.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))

	// An image to build (a recipe new to the store): the lists are refreshed first.
	cat := Recipes()
	probe := Recipe{Name: "refresh-probe", Ref: "localhost/osd-test/refresh-probe:1", Kind: KindDebian, Suite: r.Suite, Base: BaseImage,
		Packages: []string{"less"}, Cmd: []string{"/bin/sh"}}
	cat = append(cat, probe)
	old = age()
	b = &Builder{StateDir: state, Catalog: cat, RefreshLater: true}
	res, took = build(b, probe.Name)
	if !refreshed(old) {
		t.Errorf("BuildAll with RefreshLater and an image to build used the lists 2 hours old, want them refreshed first")
	}
	built := false
	for _, x := range res {
		built = built || x.Name == probe.Name && !x.Cached
	}
	if !built {
		t.Errorf("BuildAll(%s) = %+v, want it built", probe.Name, res)
	}
	t.Logf("stale lists, an image to build: refreshed, then built in %s", took.Round(time.Millisecond))
	b.WaitRefresh()
}
