package images

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/osdcloud/osd/bootstrap/images/asm"
	"github.com/osdcloud/osd/bootstrap/images/oci"
	"github.com/osdcloud/osd/bootstrap/images/oci/ocitest"
)

func TestPauseImage(t *testing.T) {
	img, err := PauseImage()
	if err != nil {
		t.Fatalf("PauseImage() = %v", err)
	}
	layers, _ := img.Layers()
	got, _ := ocitest.ReadLayer(t, layers[0])
	p, ok := got["pause"]
	if !ok || p.Type != tar.TypeReg || p.Mode != 0o755 || p.Size != int64(len(asm.PauseBinary())) {
		t.Errorf("PauseImage() /pause = %+v (present %v), want 0755 regular file of %d bytes", p, ok, len(asm.PauseBinary()))
	}
	cf, _ := img.ConfigFile()
	if len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/pause" {
		t.Errorf("PauseImage() entrypoint = %v, want [/pause]", cf.Config.Entrypoint)
	}
}

func TestDigestStable(t *testing.T) {
	build := map[string]func() (v1.Image, error){
		"pause": PauseImage,
		"files": func() (v1.Image, error) {
			// Map order and input order must not matter.
			return oci.ImageFromFiles([]File{{Path: "b", Mode: 0o644, Data: []byte("b")}, {Path: "a/x", Mode: 0o600, Data: []byte("x")}},
				ImageConfig{Labels: map[string]string{"k1": "v", "k2": "w", "k3": "z"}})
		},
		"files reordered": func() (v1.Image, error) {
			return oci.ImageFromFiles([]File{{Path: "a/x", Mode: 0o600, Data: []byte("x")}, {Path: "b", Mode: 0o644, Data: []byte("b")}},
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

func TestWriteArchiveFile(t *testing.T) {
	pause, err := PauseImage()
	if err != nil {
		t.Fatal(err)
	}
	other, err := oci.ImageFromFiles([]File{{Path: "hello", Mode: 0o644, Data: []byte("hi")}}, ImageConfig{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "osd-images.tar")
	refs := map[string]v1.Image{PauseRef: pause, "localhost/osd/hello:1": other}
	if err := oci.WriteArchiveFile(path, refs); err != nil {
		t.Fatalf("oci.WriteArchiveFile() = %v", err)
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
	if err := oci.WriteArchive(io.Discard, map[string]v1.Image{"not a ref!": pause}); err == nil {
		t.Errorf("oci.WriteArchive(bad ref) = nil, want error")
	}
	if err := oci.WriteArchiveFile(filepath.Join(dir, "missing", "x.tar"), refs); err == nil {
		t.Errorf("oci.WriteArchiveFile(missing dir) = nil, want error")
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
