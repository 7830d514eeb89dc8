package images

import (
	"archive/tar"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/osdcloud/osd/bootstrap/images/oci/ocitest"
)

func requireBuildTools(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds images with mmdebstrap (host work: run without -short, under the host lock)")
	}
	if os.Geteuid() != 0 {
		t.Skip("mmdebstrap --mode=root needs root")
	}
	for _, tool := range []string{"mmdebstrap", "apt-get"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not installed (test/deps.sh installs mmdebstrap): %v", tool, err)
		}
	}
}

// sharedState is one state directory for the build tests of this run, so the
// .deb cache and the package lists are downloaded once.
var (
	sharedStateOnce sync.Once
	sharedStateDir  string
)

func buildState(t testing.TB) string {
	sharedStateOnce.Do(func() {
		d, err := os.MkdirTemp("", "osd-images-test-")
		if err != nil {
			t.Fatal(err)
		}
		sharedStateDir = d
	})
	return sharedStateDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedStateDir != "" {
		if err := removeTree(sharedStateDir); err != nil {
			println("cleanup:", err.Error())
		}
	}
	os.Exit(code)
}

// minimalRecipe is the catalog's memcached image: minbase plus one package
// whose maintainer script creates a system user, which the recipe pre-creates
// with a fixed UID.
func minimalRecipe(t testing.TB) Recipe {
	r, ok := RecipeByName("memcached")
	if !ok {
		t.Fatal("no memcached recipe")
	}
	return r
}

func TestBuildMinimalImage(t *testing.T) {
	requireBuildTools(t)
	state := buildState(t)
	var mu sync.Mutex
	var events []Event
	b := &Builder{StateDir: state, Progress: func(e Event) { mu.Lock(); events = append(events, e); mu.Unlock() }}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r := minimalRecipe(t)
	res, err := b.Build(ctx, r)
	if err != nil {
		t.Fatalf("Build(%s) = %v", r.Name, err)
	}
	t.Logf("cold build: %s %s %.1f MB in %s, steps %v", res.Ref, res.Digest, float64(res.Size)/1e6, res.Duration, res.Steps)
	if res.Cached {
		t.Errorf("Build(%s) first build Cached = true, want false", r.Name)
	}
	var setUp, packed bool
	for _, e := range events {
		setUp = setUp || (e.Step == "install" && e.Packages > 0 && e.Total > 0)
		packed = packed || (e.Step == "pack" && e.MB > 0)
	}
	if !setUp || !packed {
		t.Errorf("progress events: package counts %v, MB %v; want both", setUp, packed)
	}
	for _, step := range []string{"resolve", "download", "install", "customize", "pack", "store"} {
		found := false
		for _, st := range res.Steps {
			found = found || st.Step == step
		}
		if !found {
			t.Errorf("Build(%s) steps %v lack %s", r.Name, res.Steps, step)
		}
	}
	store, _ := b.Store()
	img, st, err := store.Get(r.Name)
	if err != nil {
		t.Fatalf("Store.Get(%s) = %v", r.Name, err)
	}
	if st.Digest != res.Digest || st.Ref != r.Ref || st.RecipeHash != r.Hash() {
		t.Errorf("Store.Get(%s) = %+v, want digest %s ref %s recipe %s", r.Name, st, res.Digest, r.Ref, r.Hash())
	}
	// memcached is layered on base: base's layer, then its own.
	layers, err := img.Layers()
	if err != nil || len(layers) != 2 {
		t.Fatalf("image layers = %d, %v; want 2 (base, memcached)", len(layers), err)
	}
	baseImg, _, err := store.Get(BaseImage)
	if err != nil {
		t.Fatalf("Store.Get(%s) = %v", BaseImage, err)
	}
	bl, _ := baseImg.Layers()
	if len(bl) != 1 || layerDigest(t, bl[0]) != layerDigest(t, layers[0]) {
		t.Errorf("memcached's lower layer %s, want base's only layer", layerDigest(t, layers[0]))
	}
	if mt, _ := layers[1].MediaType(); mt != types.DockerUncompressedLayer {
		t.Errorf("layer media type %s, want %s (no compression on the local path)", mt, types.DockerUncompressedLayer)
	}
	top, _ := ocitest.ReadLayerAll(t, layers[1])
	for name := range top {
		if strings.HasPrefix(name, "usr/lib/x86_64-linux-gnu/libc.so") || name == "usr/bin/bash" {
			t.Errorf("memcached's own layer holds %s, which base has", name)
		}
	}
	got, _ := flatLayers(t, layers)
	checks := []struct {
		name     string
		typ      byte
		mode     int64
		uid, gid int
	}{
		{"usr/bin/memcached", tar.TypeReg, 0o755, 0, 0},
		{"etc/passwd", tar.TypeReg, 0o644, 0, 0},
		{"etc/shadow", tar.TypeReg, 0o640, 0, 42}, // group shadow
		{"tmp", tar.TypeDir, 0o1777, 0, 0},
		{"usr/bin/passwd", tar.TypeReg, 0o4755, 0, 0},
		{"var/lib/apt/lists", tar.TypeDir, 0o755, 0, 0},
	}
	for _, c := range checks {
		e, ok := got[c.name]
		if !ok {
			t.Errorf("image entry %s missing", c.name)
			continue
		}
		if e.Typeflag != c.typ || e.Mode != c.mode || e.Uid != c.uid || e.Gid != c.gid {
			t.Errorf("image entry %s = type %c mode %o %d:%d, want type %c mode %o %d:%d", c.name, e.Typeflag, e.Mode, e.Uid, e.Gid, c.typ, c.mode, c.uid, c.gid)
		}
	}
	for name := range got {
		for _, bad := range []string{"var/lib/apt/lists/", "var/cache/apt/archives/", "proc/", "dev/", "run/", "usr/sbin/policy-rc.d", "etc/resolv.conf"} {
			if strings.HasPrefix(name, bad) && name+"/" != bad {
				t.Errorf("image has %s, want nothing under %s", name, bad)
			}
		}
	}
	// The fixed UID survived the package's own adduser.
	passwd := readMerged(t, layers, "etc/passwd")
	if !strings.Contains(passwd, "memcache:x:912:912:") {
		t.Errorf("etc/passwd = %q, want memcache:x:912:912:", passwd)
	}
	if hosts := readMerged(t, layers, "etc/hosts"); strings.Contains(hosts, "127.0.1.1") {
		t.Errorf("etc/hosts = %q, want the build host's name gone", hosts)
	}
	cf, _ := img.ConfigFile()
	if cf.Config.Labels[LabelRecipe] != r.Hash() || cf.Config.User != "memcache" {
		t.Errorf("config labels %v user %q, want recipe %s user memcache", cf.Config.Labels, cf.Config.User, r.Hash())
	}

	// Unchanged recipe: cached, same digest, no rebuild.
	again, err := b.Build(ctx, r)
	if err != nil {
		t.Fatalf("second Build(%s) = %v", r.Name, err)
	}
	t.Logf("cached build: %s", again.Duration)
	if !again.Cached || again.Digest != res.Digest {
		t.Errorf("second Build(%s) = cached %v digest %s, want cached, %s", r.Name, again.Cached, again.Digest, res.Digest)
	}
	debs, _ := filepath.Glob(filepath.Join(state, "cache", "debs", "*.deb"))
	if len(debs) == 0 {
		t.Errorf("no .debs kept in the cache for reuse")
	}

}

// readMerged reads name from the top-most of layers that holds it.
func readMerged(t *testing.T, layers []v1.Layer, name string) string {
	t.Helper()
	for i := len(layers) - 1; i >= 0; i-- {
		if got, ok := layerFile(t, layers[i], name); ok {
			return got
		}
	}
	t.Fatalf("%s is in no layer", name)
	return ""
}

func layerDigest(t *testing.T, l v1.Layer) string {
	t.Helper()
	d, err := l.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// layerFile reads name from one layer.
func layerFile(t *testing.T, l v1.Layer, name string) (string, bool) {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			return "", false
		}
		if h.Name == name {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return string(b), true
		}
	}
}

func readImageFile(t *testing.T, l v1.Layer, name string) string {
	t.Helper()
	b, ok := layerFile(t, l, name)
	if !ok {
		t.Fatalf("%s not in layer", name)
	}
	return b
}
