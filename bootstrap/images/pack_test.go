package images

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/osdcloud/osd/bootstrap/images/asm"
)

// tarEntry is what the tests compare of a tar header.
type tarEntry struct {
	Type     byte
	Mode     int64
	UID, GID int
	Link     string
	Size     int64
	Data     string
	Dev      [2]int64
	Xattrs   map[string]string
	ModTime  time.Time
}

// readLayer returns the entries of a layer's uncompressed tar, by name, and
// the names in tar order.
func readLayer(t *testing.T, l v1.Layer) (map[string]tarEntry, []string) {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatalf("Uncompressed() = %v", err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	got := map[string]tarEntry{}
	var order []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read layer tar: %v", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(timeEpoch) {
			t.Errorf("layer entry %s mtime = %v, want %v", h.Name, h.ModTime, timeEpoch)
		}
		e := tarEntry{Type: h.Typeflag, Mode: h.Mode, UID: h.Uid, GID: h.Gid, Link: h.Linkname, Size: h.Size, Dev: [2]int64{h.Devmajor, h.Devminor}}
		if len(data) < 64 {
			e.Data = string(data)
		}
		for k, v := range h.PAXRecords {
			if len(k) > 12 && k[:12] == "SCHILY.xattr" {
				if e.Xattrs == nil {
					e.Xattrs = map[string]string{}
				}
				e.Xattrs[k[13:]] = v
			}
		}
		got[h.Name] = e
		order = append(order, h.Name)
	}
	return got, order
}

func TestImageFromFilesLayer(t *testing.T) {
	files := []File{
		{Path: "/usr/bin/tool", Mode: 0o4755, UID: 0, GID: 0, Data: []byte("#!/bin/sh\n")},
		{Path: "etc/app/app.conf", Mode: 0o640, UID: 64060, GID: 64060, Data: []byte("[DEFAULT]\n")},
		{Path: "var/lib/app", Mode: os.ModeDir | 0o750, UID: 64060, GID: 64061},
		{Path: "bin/sh", Link: "busybox"},
		{Path: "usr/bin/dns", Mode: 0o755, Data: []byte("x"), Xattrs: map[string]string{"security.capability": vfsCapNetBindService()}},
	}
	img, err := ImageFromFiles(files, ImageConfig{Entrypoint: []string{"/usr/bin/tool"}, User: "64060"})
	if err != nil {
		t.Fatalf("ImageFromFiles() = %v", err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("Layers() = %d, %v, want 1 layer", len(layers), err)
	}
	got, order := readLayer(t, layers[0])
	want := map[string]tarEntry{
		"bin/":             {Type: tar.TypeDir, Mode: 0o755},
		"bin/sh":           {Type: tar.TypeSymlink, Mode: 0o777, Link: "busybox"},
		"etc/":             {Type: tar.TypeDir, Mode: 0o755},
		"etc/app/":         {Type: tar.TypeDir, Mode: 0o755},
		"etc/app/app.conf": {Type: tar.TypeReg, Mode: 0o640, UID: 64060, GID: 64060, Size: 10, Data: "[DEFAULT]\n"},
		"usr/":             {Type: tar.TypeDir, Mode: 0o755},
		"usr/bin/":         {Type: tar.TypeDir, Mode: 0o755},
		"usr/bin/tool":     {Type: tar.TypeReg, Mode: 0o4755, Size: 10, Data: "#!/bin/sh\n"},
		"usr/bin/dns":      {Type: tar.TypeReg, Mode: 0o755, Size: 1, Data: "x", Xattrs: map[string]string{"security.capability": vfsCapNetBindService()}},
		"var/":             {Type: tar.TypeDir, Mode: 0o755},
		"var/lib/":         {Type: tar.TypeDir, Mode: 0o755},
		"var/lib/app/":     {Type: tar.TypeDir, Mode: 0o750, UID: 64060, GID: 64061},
	}
	if len(got) != len(want) {
		t.Errorf("layer has %d entries %v, want %d", len(got), order, len(want))
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("layer entry %s missing", name)
			continue
		}
		if g.Type != w.Type || g.Mode != w.Mode || g.UID != w.UID || g.GID != w.GID || g.Link != w.Link || g.Size != w.Size || g.Data != w.Data || !sameMap(g.Xattrs, w.Xattrs) {
			t.Errorf("layer entry %s = %+v, want %+v", name, g, w)
		}
	}
	if !sort.StringsAreSorted(order) {
		t.Errorf("layer order = %v, want sorted", order)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Architecture != "amd64" || cf.OS != "linux" || !cf.Created.Equal(timeEpoch) || cf.Config.User != "64060" || len(cf.Config.Entrypoint) != 1 {
		t.Errorf("ConfigFile() = %+v, want amd64/linux, epoch, user 64060, entrypoint", cf)
	}
	if len(cf.History) != 1 || !cf.History[0].Created.Equal(timeEpoch) {
		t.Errorf("ConfigFile().History = %+v, want one entry at epoch", cf.History)
	}
}

func TestImageFromFilesErrors(t *testing.T) {
	tests := []struct {
		name  string
		files []File
	}{
		{"duplicate", []File{{Path: "a", Mode: 0o644}, {Path: "/a", Mode: 0o644}}},
		{"empty path", []File{{Path: "/", Mode: 0o644}}},
		{"parent is a file", []File{{Path: "a", Mode: 0o644}, {Path: "a/b", Mode: 0o644}}},
		{"device", []File{{Path: "dev/x", Mode: os.ModeDevice | 0o644}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ImageFromFiles(tc.files, ImageConfig{}); err == nil {
				t.Errorf("ImageFromFiles(%v) = nil error, want an error", tc.files)
			}
		})
	}
}

func TestDigestStable(t *testing.T) {
	build := map[string]func() (v1.Image, error){
		"pause": PauseImage,
		"files": func() (v1.Image, error) {
			// Map order and input order must not matter.
			return ImageFromFiles([]File{{Path: "b", Mode: 0o644, Data: []byte("b")}, {Path: "a/x", Mode: 0o600, Data: []byte("x")}},
				ImageConfig{Labels: map[string]string{"k1": "v", "k2": "w", "k3": "z"}})
		},
		"files reordered": func() (v1.Image, error) {
			return ImageFromFiles([]File{{Path: "a/x", Mode: 0o600, Data: []byte("x")}, {Path: "b", Mode: 0o644, Data: []byte("b")}},
				ImageConfig{Labels: map[string]string{"k3": "z", "k2": "w", "k1": "v"}})
		},
	}
	digests := map[string]v1.Hash{}
	for name, f := range build {
		var first v1.Hash
		for i := 0; i < 2; i++ {
			img, err := f()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			d, err := img.Digest()
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				first = d
			} else if d != first {
				t.Errorf("%s digest = %s on second build, want %s", name, d, first)
			}
		}
		digests[name] = first
	}
	if digests["files"] != digests["files reordered"] {
		t.Errorf("digest depends on input order: %s != %s", digests["files"], digests["files reordered"])
	}
	if digests["files"] == digests["pause"] {
		t.Errorf("different images have the same digest %s", digests["files"])
	}
}

func TestPauseImage(t *testing.T) {
	img, err := PauseImage()
	if err != nil {
		t.Fatalf("PauseImage() = %v", err)
	}
	layers, _ := img.Layers()
	got, _ := readLayer(t, layers[0])
	p, ok := got["pause"]
	if !ok || p.Type != tar.TypeReg || p.Mode != 0o755 || p.Size != int64(len(asm.PauseBinary())) {
		t.Errorf("PauseImage() /pause = %+v (present %v), want 0755 regular file of %d bytes", p, ok, len(asm.PauseBinary()))
	}
	cf, _ := img.ConfigFile()
	if len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/pause" {
		t.Errorf("PauseImage() entrypoint = %v, want [/pause]", cf.Config.Entrypoint)
	}
}

func TestWriteArchiveFile(t *testing.T) {
	pause, err := PauseImage()
	if err != nil {
		t.Fatal(err)
	}
	other, err := ImageFromFiles([]File{{Path: "hello", Mode: 0o644, Data: []byte("hi")}}, ImageConfig{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "osd-images.tar")
	refs := map[string]v1.Image{PauseRef: pause, "localhost/osd/hello:1": other}
	if err := WriteArchiveFile(path, refs); err != nil {
		t.Fatalf("WriteArchiveFile() = %v", err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("stat archive = %v, %v; want mode 0644", st, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("archive dir has %d entries, want 1 (no temporary left)", len(ents))
	}
	// Read the docker-save manifest.
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var manifest tarball.Manifest
	names := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names[h.Name] = true
		if h.Name == "manifest.json" {
			if err := json.NewDecoder(tr).Decode(&manifest); err != nil {
				t.Fatal(err)
			}
		}
	}
	tags := map[string]bool{}
	for _, d := range manifest {
		for _, tg := range d.RepoTags {
			tags[tg] = true
		}
		if !names[d.Config] {
			t.Errorf("archive manifest config %s not in archive", d.Config)
		}
		for _, l := range d.Layers {
			if !names[l] {
				t.Errorf("archive manifest layer %s not in archive", l)
			}
		}
	}
	for r := range refs {
		if !tags[r] {
			t.Errorf("archive RepoTags = %v, want %s", tags, r)
		}
	}
	// Read back through go-containerregistry: the same config and layer contents (a
	// docker-save archive keeps no manifest, and the reader compresses uncompressed
	// layers, so the manifest digest is not kept; WriteOCIArchive keeps it).
	for r, img := range refs {
		back, err := tarball.ImageFromPath(path, mustTag(t, r))
		if err != nil {
			t.Fatalf("tarball.ImageFromPath(%s) = %v", r, err)
		}
		want, _ := img.ConfigName()
		got, err := back.ConfigName()
		if err != nil || got != want {
			t.Errorf("archive image %s config = %s, %v, want %s", r, got, err, want)
		}
		wl, _ := img.Layers()
		gl, err := back.Layers()
		if err != nil || len(gl) != len(wl) {
			t.Fatalf("archive image %s layers = %d, %v, want %d", r, len(gl), err, len(wl))
		}
		for i := range wl {
			w, _ := wl[i].DiffID()
			g, err := gl[i].DiffID()
			if err != nil || g != w {
				t.Errorf("archive image %s layer %d diff ID = %s, %v, want %s", r, i, g, err, w)
			}
		}
	}
	if err := WriteArchive(io.Discard, map[string]v1.Image{"not a ref!": pause}); err == nil {
		t.Errorf("WriteArchive(bad ref) = nil, want error")
	}
	if err := WriteArchiveFile(filepath.Join(dir, "missing", "x.tar"), refs); err == nil {
		t.Errorf("WriteArchiveFile(missing dir) = nil, want error")
	}
}

func TestBusyboxImage(t *testing.T) {
	if _, err := os.Stat(BusyboxPath); err != nil {
		t.Fatalf("busybox-static not installed (test/deps.sh installs it): %v", err)
	}
	img, ref, err := BusyboxImage()
	if err != nil {
		t.Fatalf("BusyboxImage() = %v", err)
	}
	d, _ := img.Digest()
	if ref != "localhost/osd/busybox:"+d.Hex[:12] {
		t.Errorf("BusyboxImage() ref = %s, want localhost/osd/busybox:%s", ref, d.Hex[:12])
	}
	layers, _ := img.Layers()
	got, _ := readLayer(t, layers[0])
	if e := got["bin/sh"]; e.Type != tar.TypeSymlink || e.Link != "busybox" {
		t.Errorf("BusyboxImage() bin/sh = %+v, want symlink to busybox", e)
	}
	if e := got["bin/busybox"]; e.Type != tar.TypeReg || e.Mode != 0o755 || e.Size < 100000 {
		t.Errorf("BusyboxImage() bin/busybox = %+v, want 0755 regular file", e)
	}
	if e := got["tmp/"]; e.Mode != 0o1777 {
		t.Errorf("BusyboxImage() tmp/ mode = %o, want 1777", e.Mode)
	}
}

func mustTag(t *testing.T, r string) *name.Tag {
	t.Helper()
	tag, err := name.NewTag(r)
	if err != nil {
		t.Fatal(err)
	}
	return &tag
}
