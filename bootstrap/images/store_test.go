package images

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/osdcloud/osd/bootstrap/images/oci"
)

// smallStore returns a store holding pause and two small file images.
func smallStore(t *testing.T) *Store {
	t.Helper()
	s, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatalf("OpenStore() = %v", err)
	}
	pause, err := PauseImage()
	if err != nil {
		t.Fatal(err)
	}
	put := func(name, ref string, img v1.Image) {
		if _, err := s.Put(img, Stored{Name: name, Ref: ref, RecipeHash: "r-" + name, CacheKey: "k-" + name}); err != nil {
			t.Fatalf("Put(%s) = %v", name, err)
		}
	}
	put("pause", PauseRef, pause)
	for _, n := range []string{"a", "b"} {
		img, err := oci.ImageFromFiles([]File{{Path: "etc/" + n, Mode: 0o644, Data: []byte(strings.Repeat(n, 100000))}}, ImageConfig{})
		if err != nil {
			t.Fatal(err)
		}
		put(n, "localhost/osd/"+n+":1", img)
	}
	return s
}

func TestStorePutReplace(t *testing.T) {
	s := smallStore(t)
	before, _ := s.List()
	img, err := oci.ImageFromFiles([]File{{Path: "etc/a2", Mode: 0o644, Data: []byte("new")}}, ImageConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(img, Stored{Name: "a", Ref: "localhost/osd/a:2"}); err != nil {
		t.Fatal(err)
	}
	after, _ := s.List()
	if len(after) != len(before) {
		t.Errorf("List() after replacing a = %d images, want %d", len(after), len(before))
	}
	_, st, err := s.Get("a")
	d, _ := img.Digest()
	if err != nil || st.Digest != d.String() || st.Ref != "localhost/osd/a:2" {
		t.Errorf("Get(a) = %+v, %v; want digest %s ref localhost/osd/a:2", st, err, d)
	}
	// The old image's layer blob was collected.
	blobs, _ := os.ReadDir(filepath.Join(s.Dir(), "oci", "blobs", "sha256"))
	if len(blobs) != 9 { // 3 images x (manifest, config, layer)
		t.Errorf("store holds %d blobs, want 9 (old ones collected)", len(blobs))
	}
	if _, _, err := s.Get("nope"); !errors.Is(err, ErrNotStored) {
		t.Errorf("Get(nope) = %v, want ErrNotStored", err)
	}
}
