package bundle

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/bootstrap/images/asm"
	"github.com/osdcloud/osd/bootstrap/images/oci"
	"github.com/osdcloud/osd/bootstrap/images/oci/ocitest"
)

// smallStore returns a store holding pause and two small file images.
func smallStore(t *testing.T) *images.Store {
	t.Helper()
	s, err := images.OpenStore(t.TempDir())
	if err != nil {
		t.Fatalf("images.OpenStore() = %v", err)
	}
	pause, err := images.PauseImage()
	if err != nil {
		t.Fatal(err)
	}
	put := func(name, ref string, img v1.Image) {
		if _, err := s.Put(img, images.Stored{Name: name, Ref: ref, RecipeHash: "r-" + name, CacheKey: "k-" + name}); err != nil {
			t.Fatalf("Put(%s) = %v", name, err)
		}
	}
	put("pause", images.PauseRef, pause)
	for _, n := range []string{"a", "b"} {
		img, err := oci.ImageFromFiles([]oci.File{{Path: "etc/" + n, Mode: 0o644, Data: []byte(strings.Repeat(n, 100000))}}, oci.ImageConfig{})
		if err != nil {
			t.Fatal(err)
		}
		put(n, "localhost/osd/"+n+":1", img)
	}
	return s
}

func TestBundleRoundTrip(t *testing.T) {
	src := smallStore(t)
	path := filepath.Join(t.TempDir(), "osd-images.bundle")
	exported, err := ExportFile(path, src)
	if err != nil {
		t.Fatalf("ExportFile() = %v", err)
	}
	if len(exported) != 3 {
		t.Fatalf("ExportFile() exported %d images, want 3", len(exported))
	}
	dst, err := images.OpenStore(filepath.Join(t.TempDir(), "fresh"))
	if err != nil {
		t.Fatal(err)
	}
	imported, err := Import(path, dst)
	if err != nil {
		t.Fatalf("Import() = %v", err)
	}
	want, _ := src.List()
	got, _ := dst.List()
	if len(got) != len(want) || len(imported) != len(want) {
		t.Fatalf("imported %d, listed %d, want %d", len(imported), len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("after import %s = %+v, want %+v", want[i].Name, got[i], want[i])
		}
	}
	// An image read back from the new store still verifies end to end.
	img, _, err := dst.Get("pause")
	if err != nil {
		t.Fatal(err)
	}
	layers, _ := img.Layers()
	entries, _ := ocitest.ReadLayerAll(t, layers[0])
	if e := entries["pause"]; e.Size != int64(len(asm.PauseBinary())) {
		t.Errorf("imported pause /pause size = %d, want %d", e.Size, len(asm.PauseBinary()))
	}
	// Export of a subset; unknown names are refused.
	if sel, err := ExportFile(filepath.Join(t.TempDir(), "one"), src, "pause"); err != nil || len(sel) != 1 {
		t.Errorf("ExportFile(pause) = %d, %v; want 1 image", len(sel), err)
	}
	if _, err := ExportFile(filepath.Join(t.TempDir(), "x"), src, "nope"); err == nil {
		t.Errorf("ExportFile(nope) = nil error, want error")
	}
}

func TestImportBundleRejectsDamage(t *testing.T) {
	src := smallStore(t)
	// The uncompressed form, so a flipped byte in a blob keeps the tar (and the
	// compression) valid and only the digest check can catch it; the compressed
	// file's damage is in the cases below too.
	var plain bytes.Buffer
	if _, err := Export(&plain, src); err != nil {
		t.Fatal(err)
	}
	data := plain.Bytes()
	good := filepath.Join(t.TempDir(), "good.bundle")
	if _, err := ExportFile(good, src); err != nil {
		t.Fatal(err)
	}
	zdata, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(zdata, zstdMagic) || len(zdata) >= len(data) {
		t.Errorf("ExportFile() wrote %d bytes starting %x, want zstd smaller than the %d-byte tar", len(zdata), zdata[:4], len(data))
	}
	zflip := append([]byte(nil), zdata...)
	zflip[len(zflip)/2] ^= 0x01
	flip := func(off int) []byte {
		b := append([]byte(nil), data...)
		b[off] ^= 0x01
		return b
	}
	// Find the layer blob of image a inside the bundle and flip a byte in
	// it (the tar framing stays valid; only the digest check can catch it).
	img, _, err := src.Get("a")
	if err != nil {
		t.Fatal(err)
	}
	layers, _ := img.Layers()
	rc, _ := layers[0].Compressed()
	blob, _ := io.ReadAll(rc)
	rc.Close()
	at := bytes.Index(data, blob)
	if at < 0 || len(blob) < 16 {
		t.Fatalf("layer blob of a (%d bytes) not found in the bundle", len(blob))
	}
	cfgName, _ := img.ConfigName()
	cfg, _ := img.RawConfigFile()
	atCfg := bytes.Index(data, cfg)
	tests := []struct {
		name string
		data []byte
	}{
		{"flipped byte in a layer blob", flip(at + len(blob)/2)},
		{"flipped byte in a config blob " + cfgName.Hex[:12], flip(atCfg + 10)},
		{"flipped byte in the tar framing", flip(len(data) / 2)},
		{"truncated to half", data[:len(data)/2]},
		{"truncated before the end", data[:len(data)-1500]},
		{"only the header", data[:512]},
		{"empty", nil},
		{"not a tar", []byte(strings.Repeat("garbage!", 200))},
		{"compressed: flipped byte", zflip},
		{"compressed: truncated", zdata[:len(zdata)*2/3]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.bundle")
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "fresh")
			dst, err := images.OpenStore(dir)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Import(path, dst)
			if err == nil {
				t.Fatalf("Import(%s) = %d images, nil error; want an error", tc.name, len(got))
			}
			if !errors.Is(err, ErrBad) || !strings.Contains(err.Error(), "corrupt") || !strings.Contains(err.Error(), "nothing was imported") {
				t.Errorf("Import(%s) error = %q, want ErrBad saying corrupt, nothing imported", tc.name, err)
			}
			t.Logf("%s: %v", tc.name, err)
			if l, _ := dst.List(); len(l) != 0 {
				t.Errorf("after a refused import the store lists %d images, want 0", len(l))
			}
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if e.Name() != "oci" {
					t.Errorf("leftover %s in the store dir after a refused import", e.Name())
				}
			}
			if blobs, _ := os.ReadDir(filepath.Join(dir, "oci", "blobs", "sha256")); len(blobs) != 0 {
				t.Errorf("after a refused import the store has %d blobs, want 0", len(blobs))
			}
		})
	}
}
