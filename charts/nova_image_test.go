package charts

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/osdcloud/osd/bootstrap/deploy"
	"github.com/osdcloud/osd/bootstrap/images"
)

// imageTree is the file tree of an image: every path (no leading slash) and, for symlinks,
// its target.
type imageTree map[string]*tar.Header

// readImageTree flattens a stored image's layers and records its file headers.
func readImageTree(t *testing.T, store *images.Store, name string) (imageTree, []string) {
	t.Helper()
	img, _, err := store.Get(name)
	if errors.Is(err, images.ErrNotStored) {
		t.Skipf("image %s is not in the image store %s (not built yet)", name, store.Dir())
	}
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tree := imageTree{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read image %s: %v", name, err)
		}
		tree[strings.Trim(path.Clean("/"+h.Name), "/")] = h
	}
	var pathDirs []string
	for _, e := range cfg.Config.Env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			pathDirs = strings.Split(v, ":")
		}
	}
	return tree, pathDirs
}

// resolve follows symlinks (in any component) inside the tree and returns the header of
// the file p names, or nil.
func (tree imageTree) resolve(p string) *tar.Header {
	parts := strings.Split(strings.Trim(path.Clean("/"+p), "/"), "/")
	cur := ""
	for hops := 0; len(parts) > 0 && hops < 40; {
		next := path.Join(cur, parts[0])
		h := tree[next]
		if h == nil {
			return nil
		}
		if h.Typeflag == tar.TypeSymlink {
			hops++
			target := h.Linkname
			if !path.IsAbs(target) {
				target = path.Join("/", cur, target)
			}
			parts = append(strings.Split(strings.Trim(path.Clean(target), "/"), "/"), parts[1:]...)
			cur = ""
			continue
		}
		cur, parts = next, parts[1:]
		if len(parts) == 0 {
			return h
		}
	}
	return nil
}

// lookPath finds a command as the container runtime would, in the image's PATH.
func (tree imageTree) lookPath(cmd string, pathDirs []string) bool {
	if strings.Contains(cmd, "/") {
		h := tree.resolve(cmd)
		return h != nil && h.Typeflag == tar.TypeReg && h.Mode&0o111 != 0
	}
	for _, d := range pathDirs {
		if h := tree.resolve(path.Join(d, cmd)); h != nil && h.Typeflag == tar.TypeReg && h.Mode&0o111 != 0 {
			return true
		}
	}
	return false
}

// TestNovaImages checks, in the images osd built (the image store under /var/cache/osd,
// or OSD_CHARTS_IMAGES), that every command the nova chart runs exists: each container's
// command in the image's PATH, the programs its scripts call, and the files its config
// names. An image that is not built yet is skipped.
func TestNovaImages(t *testing.T) {
	dir := os.Getenv("OSD_CHARTS_IMAGES")
	if dir == "" {
		dir = "/var/cache/osd/images"
	}
	switch _, err := os.Stat(filepath.Join(dir, "oci", "index.json")); {
	case testing.Short():
		t.Skip("reads whole images (about 20 s); skipped in -short")
	case err != nil:
		t.Skipf("no image store in %s (set OSD_CHARTS_IMAGES): %v", dir, err)
	}
	store, err := images.OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	n, _, _ := renderNova(t, deploy.DeploymentSpec{Images: testImages})
	commands := map[string]map[string]bool{} // image -> commands of its containers
	for _, pod := range n.pods() {
		for _, c := range allContainers(pod) {
			name := ""
			for img, ref := range testImages {
				if ref == c.Image {
					name = img
				}
			}
			if commands[name] == nil {
				commands[name] = map[string]bool{}
			}
			commands[name][c.Command[0]] = true
		}
	}
	tests := []struct {
		image    string
		programs []string // called by the steps' scripts and probes
		files    []string // named by the config or the packages' defaults
	}{
		{
			image:    "openstack",
			programs: []string{"sed", "mysql", "mysqladmin", "openstack", "nova-manage", "grep", "basename"},
			files: []string{
				"usr/share/novnc/vnc_lite.html",             // [vnc] novncproxy_base_url
				"etc/nova/api-paste.ini",                    // nova-api's api_paste_config
				"etc/default/nova-consoleproxy",             // NOVA_CONSOLE_PROXY_TYPE=novnc
				"usr/lib/python3/dist-packages/pymysql",     // mysql+pymysql://
				"usr/lib/python3/dist-packages/memcache.py", // keystonemiddleware's memcached_servers
			},
		},
		{
			image:    "compute",
			programs: []string{"sed", "basename", "pgrep", "test", "qemu-img", "privsep-helper", "sudo"},
			files: []string{
				"usr/lib/python3/dist-packages/vif_plug_ovs", // os-vif's OVS plugin ([os_vif_ovs])
				"usr/lib/python3/dist-packages/ovsdbapp",     // its native OVSDB client
				"usr/lib/python3/dist-packages/libvirt.py",   // python3-libvirt
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.image, func(t *testing.T) {
			began := time.Now()
			tree, pathDirs := readImageTree(t, store, tt.image)
			t.Logf("read %d entries of image %s in %s", len(tree), tt.image, time.Since(began).Round(100*time.Millisecond))
			if len(commands[tt.image]) == 0 {
				t.Fatalf("the chart runs nothing from image %s", tt.image)
			}
			for cmd := range commands[tt.image] {
				if !tree.lookPath(cmd, pathDirs) {
					t.Errorf("image %s lacks the container command %s (PATH %v)", tt.image, cmd, pathDirs)
				}
			}
			for _, p := range tt.programs {
				if !tree.lookPath(p, pathDirs) {
					t.Errorf("image %s lacks %s, which the chart's scripts call", tt.image, p)
				}
			}
			for _, f := range tt.files {
				if tree.resolve(f) == nil {
					t.Errorf("image %s lacks %s", tt.image, f)
				}
			}
			if tt.image == "openstack" {
				// The nova user the pods run as.
				if h := tree.resolve("var/lib/nova/tmp"); h == nil || h.Uid != 64060 {
					t.Errorf("image openstack var/lib/nova/tmp = %+v, want owned by nova (64060): lock_path", h)
				}
			}
		})
	}
}
