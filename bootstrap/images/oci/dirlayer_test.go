package oci

import (
	"archive/tar"
	"encoding/binary"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"golang.org/x/sys/unix"

	"github.com/osdcloud/osd/bootstrap/images/oci/ocitest"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (chown, mknod)")
	}
}

// capNetBindService is a VFS_CAP_REVISION_2 security.capability value
// granting cap_net_bind_service (bit 10), effective.
func capNetBindService() string {
	b := make([]byte, 20)
	binary.LittleEndian.PutUint32(b[0:], 0x02000000|1)
	binary.LittleEndian.PutUint32(b[4:], 1<<10)
	return string(b)
}

func TestLayerFromDir(t *testing.T) {
	requireRoot(t)
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	old := time.Date(2023, 6, 10, 12, 0, 0, 0, time.UTC)
	mk := func(rel string, mode os.FileMode, uid, gid int, data string) string {
		p := filepath.Join(root, rel)
		must(os.MkdirAll(filepath.Dir(p), 0o755))
		must(os.WriteFile(p, []byte(data), 0o600))
		must(os.Chown(p, uid, gid))
		must(os.Chmod(p, mode))
		return p
	}
	must(os.MkdirAll(filepath.Join(root, "var/lib/nova"), 0o755))
	must(os.Chown(filepath.Join(root, "var/lib/nova"), 64060, 64060))
	must(os.Chmod(filepath.Join(root, "var/lib/nova"), 0o750))
	conf := mk("etc/nova/nova.conf", 0o640, 0, 64060, "[DEFAULT]\n")
	mk("usr/bin/ping", 0o755, 0, 0, "ELF")
	pyc := mk("usr/lib/python3/m.py", 0o644, 0, 0, "x = 1\n")
	must(os.Chtimes(pyc, old, old))
	suid := mk("usr/bin/sudo", 0o755, 0, 0, "sudo")
	must(os.Chmod(suid, 0o755|os.ModeSetuid))
	must(os.Link(conf, filepath.Join(root, "etc/nova/nova.conf.hard")))
	must(os.Symlink("../lib/python3/m.py", filepath.Join(root, "usr/bin/m")))
	must(unix.Mknod(filepath.Join(root, "usr/null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	must(os.Chmod(filepath.Join(root, "usr/null"), 0o666)) // undo the umask
	must(unix.Mknod(filepath.Join(root, "usr/loop0"), unix.S_IFBLK|0o660, int(unix.Mkdev(7, 0))))
	must(os.Chmod(filepath.Join(root, "usr/loop0"), 0o660))
	must(unix.Mkfifo(filepath.Join(root, "usr/fifo"), 0o600))
	// Excluded content; the directories themselves stay.
	mk("proc/1/status", 0o644, 0, 0, "x")
	mk("var/cache/apt/archives/a.deb", 0o644, 0, 0, "deb")
	mk("var/lib/apt/lists/x_Packages", 0o644, 0, 0, "Packages")
	mk("etc/resolv.conf", 0o644, 0, 0, "nameserver 1.1.1.1\n")
	if err := unix.Lsetxattr(conf, "user.osd.test", []byte("v1"), 0); err != nil {
		t.Skipf("user xattrs not supported on %s: %v", root, err)
	}
	wantCap := capNetBindService()
	capOK := unix.Lsetxattr(filepath.Join(root, "usr/bin/ping"), "security.capability", []byte(wantCap), 0) == nil
	if !capOK {
		t.Logf("security.capability not settable here; checking user xattrs only")
	}
	// Every entry made now is "new": only m.py (2023) predates the cutoff.
	cutoff := time.Now().Add(-time.Hour)

	opts := DirOptions{Exclude: RootfsExcludes, KeepMtimesBefore: cutoff, LayerFile: filepath.Join(t.TempDir(), "layer.tar.gz")}
	var progressCalls int
	opts.Progress = func(int, int64) { progressCalls++ }
	layer, err := LayerFromDir(root, opts)
	if err != nil {
		t.Fatalf("LayerFromDir() = %v", err)
	}
	got, order := ocitest.ReadLayerAll(t, layer)
	want := map[string]ocitest.Entry{
		"etc/":               {Type: tar.TypeDir, Mode: 0o755},
		"etc/nova/":          {Type: tar.TypeDir, Mode: 0o755},
		"etc/nova/nova.conf": {Type: tar.TypeReg, Mode: 0o640, GID: 64060, Size: 10, Data: "[DEFAULT]\n", Xattrs: map[string]string{"user.osd.test": "v1"}},
		// A hard link names the inode packed first; its xattrs live there.
		"etc/nova/nova.conf.hard": {Type: tar.TypeLink, Mode: 0o640, GID: 64060, Link: "etc/nova/nova.conf"},
		"proc/":                   {Type: tar.TypeDir, Mode: 0o755},
		"usr/":                    {Type: tar.TypeDir, Mode: 0o755},
		"usr/bin/":                {Type: tar.TypeDir, Mode: 0o755},
		"usr/bin/m":               {Type: tar.TypeSymlink, Mode: 0o777, Link: "../lib/python3/m.py"},
		"usr/bin/ping":            {Type: tar.TypeReg, Mode: 0o755, Size: 3, Data: "ELF"},
		"usr/bin/sudo":            {Type: tar.TypeReg, Mode: 0o4755, Size: 4, Data: "sudo"},
		"usr/fifo":                {Type: tar.TypeFifo, Mode: 0o600},
		"usr/lib/":                {Type: tar.TypeDir, Mode: 0o755},
		"usr/lib/python3/":        {Type: tar.TypeDir, Mode: 0o755},
		"usr/lib/python3/m.py":    {Type: tar.TypeReg, Mode: 0o644, Size: 6, Data: "x = 1\n"},
		"usr/loop0":               {Type: tar.TypeBlock, Mode: 0o660, Dev: [2]int64{7, 0}},
		"usr/null":                {Type: tar.TypeChar, Mode: 0o666, Dev: [2]int64{1, 3}},
		"var/":                    {Type: tar.TypeDir, Mode: 0o755},
		"var/cache/":              {Type: tar.TypeDir, Mode: 0o755},
		"var/cache/apt/":          {Type: tar.TypeDir, Mode: 0o755},
		"var/lib/":                {Type: tar.TypeDir, Mode: 0o755},
		"var/lib/apt/":            {Type: tar.TypeDir, Mode: 0o755},
		"var/lib/apt/lists/":      {Type: tar.TypeDir, Mode: 0o755},
		"var/lib/nova/":           {Type: tar.TypeDir, Mode: 0o750, UID: 64060, GID: 64060},
	}
	if capOK {
		e := want["usr/bin/ping"]
		e.Xattrs = map[string]string{"security.capability": wantCap}
		want["usr/bin/ping"] = e
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("LayerFromDir() entry %s missing", name)
			continue
		}
		if g.Type != w.Type || g.Mode != w.Mode || g.UID != w.UID || g.GID != w.GID || g.Link != w.Link ||
			g.Size != w.Size || g.Data != w.Data || g.Dev != w.Dev || !sameMap(g.Xattrs, w.Xattrs) {
			t.Errorf("LayerFromDir() entry %s = %+v, want %+v", name, g, w)
		}
		wantTime := Epoch
		if name == "usr/lib/python3/m.py" {
			wantTime = old
		}
		if !g.ModTime.Equal(wantTime) {
			t.Errorf("LayerFromDir() entry %s mtime = %v, want %v", name, g.ModTime, wantTime)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("LayerFromDir() has unexpected entry %s", name)
		}
	}
	if !sort.StringsAreSorted(order) {
		t.Errorf("LayerFromDir() order = %v, want lexical", order)
	}
	if progressCalls == 0 {
		t.Errorf("LayerFromDir() called Progress 0 times, want >= 1")
	}
	// The same tree packs to the same digest.
	again, err := LayerFromDir(root, DirOptions{Exclude: RootfsExcludes, KeepMtimesBefore: cutoff})
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := layer.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("LayerFromDir() digest = %s then %s, want stable", d1, d2)
	}
	if st, err := os.Stat(opts.LayerFile); err != nil || st.Size() == 0 {
		t.Errorf("layer file %s: %v, want non-empty", opts.LayerFile, err)
	}
}

func TestWhiteoutLayer(t *testing.T) {
	base, err := ImageFromFiles([]File{
		{Path: "etc/keep", Mode: 0o644, Data: []byte("keep")},
		{Path: "etc/gone", Mode: 0o644, Data: []byte("gone")},
		{Path: "var/cache/a", Mode: 0o644, Data: []byte("a")},
		{Path: "var/cache/b", Mode: 0o644, Data: []byte("b")},
		{Path: "opt/data/x", Mode: 0o644, Data: []byte("x")},
	}, ImageConfig{})
	if err != nil {
		t.Fatal(err)
	}
	wl, err := WhiteoutLayer([]string{"/etc/gone", "var/cache"}, []string{"opt/data"})
	if err != nil {
		t.Fatalf("WhiteoutLayer() = %v", err)
	}
	entries, _ := ocitest.ReadLayerAll(t, wl)
	for _, name := range []string{"etc/.wh.gone", "var/.wh.cache", "opt/data/.wh..wh..opq"} {
		if e, ok := entries[name]; !ok || e.Type != tar.TypeReg {
			t.Errorf("WhiteoutLayer() entry %s = %+v (present %v), want a regular file", name, e, ok)
		}
	}
	upper, err := ImageFromFiles([]File{{Path: "etc/new", Mode: 0o644, Data: []byte("c")}}, ImageConfig{})
	if err != nil {
		t.Fatal(err)
	}
	baseLayers, _ := base.Layers()
	upperLayers, _ := upper.Layers()
	img, err := ImageFromLayers([]v1.Layer{baseLayers[0], wl, upperLayers[0]}, ImageConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// mutate.Extract flattens file and directory whiteouts (it does not
	// implement opaque directories; containerd's applier does).
	flat, _ := ocitest.ReadTar(t, mutate.Extract(img))
	for name, want := range map[string]bool{
		"etc/keep": true, "etc/new": true, "etc/gone": false, "var/cache/a": false, "var/cache/b": false,
		"etc/.wh.gone": false, "var/.wh.cache": false,
	} {
		if _, ok := flat[name]; ok != want {
			t.Errorf("mutate.Extract() has %s = %v, want %v", name, ok, want)
		}
	}
	if _, err := WhiteoutLayer([]string{"/"}, nil); err == nil {
		t.Errorf("WhiteoutLayer(/) = nil error, want an error")
	}
}
