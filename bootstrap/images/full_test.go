package images

import (
	"archive/tar"
	"context"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// TestBuildCatalogImages builds the real catalog images and checks what each
// contains (TestBundleCatalogImages moves them all through an airgap bundle). By
// default it builds in osd's image cache (OSD_CACHE_DIR, default /var/cache/osd, as
// the daemon and the chart tests do): on a fresh machine that builds every image (openstack
// alone: ~760 packages, 1.7 GB rootfs; about 15 minutes in all), and later runs
// find them cached (same recipe and package versions) and only check them.
// OSD_TEST_FULL_IMAGES=1 builds cold in a temporary state directory instead;
// OSD_TEST_IMAGES=a,b limits it to some images.
func TestBuildCatalogImages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds (or checks the cached) catalog images for minutes; skipped in -short")
	}
	requireBuildTools(t)
	state, rel, catalog, recipes := catalogState(t)
	b := &Builder{StateDir: state, Release: rel, Catalog: catalog, Progress: func(e Event) {
		if e.Step != "mmdebstrap" || strings.HasPrefix(e.Message, "I:") || e.Packages%50 == 0 {
			t.Logf("%s %s %d/%d %.0fMB %s", e.Image, e.Step, e.Packages, e.Total, e.MB, e.Message)
		}
	}}
	// What each image must contain: path -> want regular/executable, and
	// passwd lines.
	type want struct {
		files  []string
		passwd []string
		absent []string // build-time secrets and state that must not ship
	}
	wants := map[string]want{
		"pause":   {files: []string{"pause"}},
		"coredns": {files: []string{"coredns"}},
		"openstack": {
			files: []string{"usr/bin/keystone-manage", "usr/bin/glance-api", "usr/bin/placement-api", "usr/bin/nova-api", "usr/bin/nova-conductor",
				"usr/bin/nova-scheduler", "usr/bin/nova-novncproxy", "usr/bin/neutron-server", "usr/bin/neutron-ovn-metadata-agent",
				"usr/bin/cinder-api", "usr/bin/cinder-scheduler", "usr/bin/cinder-volume", "usr/bin/cinder-backup", "usr/bin/rbd", "usr/bin/heat-api", "usr/bin/heat-engine",
				"usr/bin/openstack", "usr/sbin/apache2", "etc/default/nova-consoleproxy"},
			passwd: []string{"nova:x:64060:64060:", "cinder:x:64061:64061:", "glance:x:64062:64062:", "keystone:x:901:901:", "neutron:x:902:902:"},
		},
		"compute": {files: []string{"usr/bin/nova-compute", "usr/sbin/libvirtd", "usr/bin/qemu-system-x86_64"}, passwd: []string{"nova:x:64060:64060:", "libvirt-qemu:x:920:920:"}},
		"ceph": {files: []string{"usr/bin/ceph-mon", "usr/bin/ceph-mgr", "usr/bin/ceph-osd", "usr/bin/ceph", "usr/bin/rbd", "usr/bin/monmaptool", "usr/bin/ceph-bluestore-tool"},
			passwd: []string{"ceph:x:64045:64045:"}},
		"ovn":       {files: []string{"usr/bin/ovn-northd", "usr/bin/ovn-controller", "usr/sbin/ovs-vswitchd", "usr/sbin/ovsdb-server"}},
		"mariadb":   {files: []string{"usr/sbin/mariadbd", "var/lib/mysql"}, passwd: []string{"mysql:x:910:910:"}, absent: []string{"var/lib/mysql/mysql"}},
		"rabbitmq":  {files: []string{"usr/lib/rabbitmq/bin/rabbitmq-server"}, passwd: []string{"rabbitmq:x:911:911:"}, absent: []string{"var/lib/rabbitmq/.erlang.cookie"}},
		"memcached": {files: []string{"usr/bin/memcached"}, passwd: []string{"memcache:x:912:912:"}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()
	for _, r := range recipes {
		t.Run(r.Name, func(t *testing.T) {
			res, err := b.Build(ctx, r)
			if err != nil {
				t.Fatalf("Build(%s) = %v", r.Name, err)
			}
			t.Logf("%s: %s %.1f MB cached=%v in %s, steps %v", r.Name, res.Digest, float64(res.Size)/1e6, res.Cached, res.Duration.Round(time.Second), res.Steps)
			store, _ := b.Store()
			img, _, err := store.Get(r.Name)
			if err != nil {
				t.Fatal(err)
			}
			layers, _ := img.Layers()
			entries, files := flatLayers(t, layers, "etc/passwd")
			w := wants[r.Name]
			for _, f := range w.files {
				h, ok := entries[f]
				if !ok {
					t.Errorf("%s image lacks %s", r.Name, f)
					continue
				}
				if h.Typeflag == tar.TypeReg && h.Mode&0o111 == 0 && !strings.HasPrefix(f, "etc/") {
					t.Errorf("%s image %s mode %o, want executable", r.Name, f, h.Mode)
				}
			}
			for _, f := range w.absent {
				if _, ok := entries[f]; ok {
					t.Errorf("%s image has %s, want it left out", r.Name, f)
				}
			}
			if len(w.passwd) > 0 {
				passwd := files["etc/passwd"]
				for _, p := range w.passwd {
					if !strings.Contains(passwd, "\n"+p) && !strings.HasPrefix(passwd, p) {
						t.Errorf("%s image /etc/passwd lacks %q:\n%s", r.Name, p, passwd)
					}
				}
			}
			if r.Name == "coredns" {
				checkCoreDNSRuns(t, layers[0])
			}
		})
	}
}

// catalogState is where TestBuildCatalogImages (and TestBundleCatalogImages) build and
// what: osd's image cache (OSD_CACHE_DIR, default /var/cache/osd) or, with
// OSD_TEST_FULL_IMAGES=1, the tests' temporary state; every catalog image or those of
// OSD_TEST_IMAGES.
func catalogState(t testing.TB) (string, Release, []Recipe, []Recipe) {
	state := os.Getenv("OSD_CACHE_DIR")
	if state == "" {
		state = "/var/cache/osd"
	}
	if os.Getenv("OSD_TEST_FULL_IMAGES") == "1" {
		state = buildState(t)
	}
	var names []string
	if v := os.Getenv("OSD_TEST_IMAGES"); v != "" {
		names = strings.Split(v, ",")
	}
	// OSD_TEST_RELEASE=epoxy builds another release's catalog (in that release's
	// directory of the cache, ReleaseDir).
	rel := DefaultRelease()
	if v := os.Getenv("OSD_TEST_RELEASE"); v != "" {
		var err error
		if rel, err = ReleaseNamed(v); err != nil {
			t.Fatal(err)
		}
	}
	catalog := RecipesFor(rel)
	recipes, err := SelectIn(catalog, names...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("release %s", rel.Title())
	return state, rel, catalog, recipes
}

// flatLayers maps every path of the image, as a container sees it, to its
// header: layers in order, each layer's whiteouts (.wh.NAME) and opaque
// markers (.wh..wh..opq) removing what lower layers put there. It also returns
// the content of the regular files named in want.
func flatLayers(t *testing.T, layers []v1.Layer, want ...string) (map[string]*tar.Header, map[string]string) {
	t.Helper()
	out, files := map[string]*tar.Header{}, map[string]string{}
	drop := func(match func(p string) bool) {
		for p := range out {
			if match(p) {
				delete(out, p)
				delete(files, p)
			}
		}
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		added := map[string]*tar.Header{}
		data := map[string]string{}
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			p := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
			dir, base := path.Dir(p), path.Base(p)
			switch {
			case base == ".wh..wh..opq":
				drop(func(q string) bool { return dir == "." || strings.HasPrefix(q, dir+"/") })
			case strings.HasPrefix(base, ".wh."):
				gone := path.Join(dir, strings.TrimPrefix(base, ".wh."))
				drop(func(q string) bool { return q == gone || strings.HasPrefix(q, gone+"/") })
			default:
				added[p] = h
				if slices.Contains(want, p) && h.Typeflag == tar.TypeReg {
					b, err := io.ReadAll(tr)
					if err != nil {
						t.Fatal(err)
					}
					data[p] = string(b)
				}
			}
		}
		rc.Close()
		for p, h := range added {
			out[p] = h
			delete(files, p)
		}
		for p, d := range data {
			files[p] = d
		}
	}
	return out, files
}

// checkCoreDNSRuns extracts /coredns and runs `coredns -version`.
func checkCoreDNSRuns(t *testing.T, l v1.Layer) {
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
			t.Fatalf("coredns binary not found: %v", err)
		}
		if h.Name != "coredns" {
			continue
		}
		p := filepath.Join(t.TempDir(), "coredns")
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.ReadFrom(tr); err != nil {
			t.Fatal(err)
		}
		f.Close()
		out, err := exec.Command(p, "-version").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "CoreDNS-"+strings.TrimPrefix(corednsVersion, "v")) {
			t.Errorf("coredns -version = %q, %v; want CoreDNS-%s", out, err, strings.TrimPrefix(corednsVersion, "v"))
		}
		return
	}
}
