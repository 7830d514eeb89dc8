package bundle

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/bootstrap/images/oci"
)

// fuzzBundle is one valid bundle (pause and two small images), made once per process.
var fuzzBundle = sync.OnceValues(func() ([]byte, error) {
	dir, err := os.MkdirTemp("", "osd-fuzz-src-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	s, err := images.OpenStore(dir)
	if err != nil {
		return nil, err
	}
	pause, err := images.PauseImage()
	if err != nil {
		return nil, err
	}
	if _, err := s.Put(pause, images.Stored{Name: "pause", Ref: images.PauseRef}); err != nil {
		return nil, err
	}
	img, err := oci.ImageFromFiles([]oci.File{{Path: "etc/a", Mode: 0o644, Data: []byte("a")}}, oci.ImageConfig{})
	if err != nil {
		return nil, err
	}
	if _, err := s.Put(img, images.Stored{Name: "a", Ref: "localhost/osd/a:1"}); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	_, err = Export(&buf, s)
	return buf.Bytes(), err
})

// checkImport imports data into a fresh store next to a sentinel file and checks what
// must hold for any input: a refusal is ErrBad and leaves the store empty and no
// staging directory; nothing is ever written outside the store; a success lists every
// image it returned, each readable with all its blobs.
func checkImport(t *testing.T, data []byte) {
	base := t.TempDir()
	sentinel := filepath.Join(base, "sentinel")
	if err := os.WriteFile(sentinel, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	storeDir := filepath.Join(base, "state", "images")
	store, err := images.OpenStore(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	before := strings.Join(treeOf(t, base, storeDir), "\n")
	got, err := importBundle(bytes.NewReader(data), "fuzz.bundle", store)
	if after := strings.Join(treeOf(t, base, storeDir), "\n"); after != before {
		t.Fatalf("import changed files outside the store:\nbefore %s\nafter  %s", before, after)
	}
	ents, _ := os.ReadDir(storeDir)
	for _, e := range ents {
		if e.Name() != "oci" {
			t.Fatalf("import left %s in the store directory (err %v)", e.Name(), err)
		}
	}
	blobs, _ := os.ReadDir(filepath.Join(storeDir, "oci", "blobs", "sha256"))
	for _, b := range blobs {
		if !hexDigestRE.MatchString(b.Name()) || !b.Type().IsRegular() {
			t.Fatalf("store holds blob %q (%s)", b.Name(), b.Type())
		}
	}
	if err != nil {
		if !errors.Is(err, ErrBad) {
			t.Fatalf("importBundle() = %v, want ErrBad or success", err)
		}
		if len(blobs) != 0 {
			t.Fatalf("refused import (%v) left %d blobs in the store", err, len(blobs))
		}
		return
	}
	listed, err := store.List()
	if err != nil || len(listed) != len(got) {
		t.Fatalf("after import of %d images, List() = %d, %v", len(got), len(listed), err)
	}
	for _, st := range got {
		img, _, err := store.Get(st.Name)
		if err != nil {
			t.Fatalf("Get(%s) after import: %v", st.Name, err)
		}
		if _, err := img.Manifest(); err != nil {
			t.Fatalf("image %s after import: %v", st.Name, err)
		}
	}
}

// FuzzImportBundle feeds arbitrary bytes to the bundle reader, seeded with a valid bundle
// and the crafted ones of TestImportBundleRefusesCrafted's kinds.
func FuzzImportBundle(f *testing.F) {
	good, err := fuzzBundle()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	k := newCraftKit(f, good)
	for _, e := range craftedSeeds() {
		f.Add(k.edit(func(m *Manifest, es []bundleEntry) []bundleEntry {
			if e.listDigest != "" {
				m.Blobs = append(m.Blobs, Blob{Digest: e.listDigest, Size: int64(len(e.data))})
			}
			i := blobIndex(es)
			return append(es[:i], append([]bundleEntry{{hdr: tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: 0o644}, data: e.data}}, es[i:]...)...)
		}))
	}
	f.Add(good[:len(good)/2])
	f.Add([]byte{})
	f.Fuzz(checkImport)
}

type craftedSeed struct {
	name, link, listDigest string
	typ                    byte
	data                   []byte
}

func craftedSeeds() []craftedSeed {
	evil := []byte("* * * * * root true\n")
	d := digestOf(evil)
	h := strings.TrimPrefix(d, "sha256:")
	esc := "../../../../../sentinel"
	return []craftedSeed{
		{name: bundleBlobPrefix + esc, listDigest: "sha256:" + esc, typ: tar.TypeReg, data: evil},
		{name: "/etc/cron.d/x", typ: tar.TypeReg, data: evil},
		{name: bundleBlobPrefix + h, listDigest: d, typ: tar.TypeReg, data: evil},
		{name: bundleBlobPrefix + h, listDigest: d, typ: tar.TypeSymlink, link: "../../../sentinel"},
		{name: bundleBlobPrefix + h, listDigest: d, typ: tar.TypeLink, link: bundleManifestName},
		{name: bundleBlobPrefix + h, listDigest: d, typ: tar.TypeChar},
		{name: bundleBlobPrefix + h, listDigest: d, typ: tar.TypeFifo},
		{name: "blobs/", typ: tar.TypeDir},
		{name: bundleIndexName, typ: tar.TypeReg, data: []byte("{}")},
	}
}

// FuzzImportBundleEntry builds a bundle with archive/tar from a valid one plus one fuzzed
// entry (name, type, link target, content) at a fuzzed position, one fuzzed blob listed in
// bundle.json and a fuzzed name and digest for its first image, so the fuzzer explores the
// checks rather than tar's header checksums.
func FuzzImportBundleEntry(f *testing.F) {
	good, err := fuzzBundle()
	if err != nil {
		f.Fatal(err)
	}
	k := newCraftKit(f, good)
	for _, e := range craftedSeeds() {
		f.Add(uint8(1), e.name, e.typ, e.link, e.data, e.listDigest, int64(len(e.data)), "", "")
	}
	f.Add(uint8(0), "", byte(0), "", []byte(nil), "", int64(0), "../x", "sha256:../../x")
	f.Add(uint8(2), bundleBlobPrefix+strings.TrimPrefix(k.m.Blobs[0].Digest, "sha256:"), byte(tar.TypeReg), "", []byte("x"), "", int64(0), "", "")
	f.Fuzz(func(t *testing.T, pos uint8, name string, typ byte, link string, data []byte, listDigest string, listSize int64, imgName, imgDigest string) {
		bundle, err := k.tryEdit(func(m *Manifest, es []bundleEntry) []bundleEntry {
			if listDigest != "" {
				m.Blobs = append(m.Blobs, Blob{Digest: listDigest, Size: listSize})
			}
			if imgName != "" {
				m.Images[0].Name = imgName
			}
			if imgDigest != "" {
				m.Images[0].Digest = imgDigest
			}
			if name == "" {
				return es
			}
			i := int(pos) % (len(es) + 1)
			e := bundleEntry{hdr: tar.Header{Name: name, Typeflag: typ, Linkname: link, Mode: 0o644, ModTime: time.Unix(0, 0)}, data: data}
			return append(es[:i], append([]bundleEntry{e}, es[i:]...)...)
		})
		if err != nil {
			return // archive/tar cannot write this entry: not a bundle anyone can make
		}
		checkImport(t, bundle)
	})
}

// TestFuzzSeedsAreValid keeps the fuzz targets' base bundle importable (a fuzz target
// whose seed is refused explores nothing).
func TestFuzzSeedsAreValid(t *testing.T) {
	good, err := fuzzBundle()
	if err != nil {
		t.Fatal(err)
	}
	store, err := images.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	got, err := importBundle(bytes.NewReader(good), "seed", store)
	if err != nil || len(got) != 2 {
		t.Fatalf("importBundle(seed) = %d images, %v; want 2", len(got), err)
	}
}
