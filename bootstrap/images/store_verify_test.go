package images

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// TestStoreGetRefusesDamage: Get of a damaged image in a fresh Store fails with an error
// that names the file and says what to do, wraps ErrCorrupt and ErrNotStored, and drops
// the image (List no longer shows it); an undamaged image of the same store stays.
func TestStoreGetRefusesDamage(t *testing.T) {
	s := smallStore(t)
	img, _, err := s.Get("a")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := img.Manifest()
	layer := s.blobFile(m.Layers[0].Digest)
	flipByte(t, layer)

	fresh, err := OpenStore(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = fresh.Get("a")
	if !errors.Is(err, ErrCorrupt) || !errors.Is(err, ErrNotStored) {
		t.Fatalf("Get(a) of a damaged image = %v, want ErrCorrupt and ErrNotStored", err)
	}
	for _, want := range []string{layer, "corrupt", "build it again"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Get(a) error %q does not say %q", err, want)
		}
	}
	if _, err := os.Stat(layer); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("damaged blob still at its digest's path (err %v), want it removed", err)
	}
	all, err := fresh.List()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, st := range all {
		names = append(names, st.Name)
	}
	if strings.Join(names, ",") != "b,pause" {
		t.Errorf("List() after the drop = %v, want [b pause]", names)
	}
	if _, _, err := fresh.Get("b"); err != nil {
		t.Errorf("Get(b) (undamaged) = %v", err)
	}
}

// TestStoreVerifiesOncePerProcess: a blob is hashed the first time a Store uses it, not
// on every Get; a blob the Store wrote itself is not hashed again.
func TestStoreVerifiesOncePerProcess(t *testing.T) {
	s := smallStore(t)
	fresh, err := OpenStore(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	before := verifyStats.bytes.Load()
	if _, _, err := fresh.Get("a"); err != nil {
		t.Fatal(err)
	}
	first := verifyStats.bytes.Load() - before
	if _, _, err := fresh.Get("a"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get("a"); err != nil { // the store that wrote it
		t.Fatal(err)
	}
	second := verifyStats.bytes.Load() - before - first
	if first < 100000 || second != 0 {
		t.Errorf("bytes hashed by the first Get = %d (want the layer, >= 100000), by later ones = %d (want 0)", first, second)
	}
}

// BenchmarkVerifyBlob measures the verification of a 256 MB layer read from the page
// cache (the cost per byte of checking an image once per process).
func BenchmarkVerifyBlob(b *testing.B) {
	s, err := OpenStore(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 256<<20)
	rand.New(rand.NewSource(1)).Read(data) // test data, not a secret
	sum := sha256.Sum256(data)
	h := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
	if err := s.writeBlob(h, int64(len(data)), bytes.NewReader(data)); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	t0 := time.Now()
	for i := 0; i < b.N; i++ {
		s.checks.Delete(h.Hex)
		if err := s.verifyBlob(h, int64(len(data))); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(t0).Seconds())/float64(b.N)*1.5e9/float64(len(data)), "s/1.5GB")
}

func TestParseIndex(t *testing.T) {
	d := strings.Repeat("ab", 32)
	entry := func(mt string, size int) string {
		return `{"mediaType":"` + mt + `","digest":"sha256:` + d + `","size":` + strconv.Itoa(size) + `}`
	}
	docker := "application/vnd.docker.distribution.manifest.v2+json"
	cases := []struct {
		name, raw string
		ok        bool
	}{
		{"empty index", `{"schemaVersion":2,"manifests":[]}`, true},
		{"no manifests key", `{"schemaVersion":2}`, true},
		{"docker manifest entry", `{"schemaVersion":2,"manifests":[` + entry(docker, 419) + `]}`, true},
		{"entry without media type", `{"schemaVersion":2,"manifests":[` + entry("", 419) + `]}`, true},
		{"truncated", `{"schemaVersion":2,"manifests":[` + entry(docker, 419)[:40], false},
		{"empty file", ``, false},
		{"schema 1", `{"schemaVersion":1,"manifests":[]}`, false},
		{"index entry (nested index)", `{"schemaVersion":2,"manifests":[` + entry("application/vnd.oci.image.index.v1+json", 419) + `]}`, false},
		{"zero size", `{"schemaVersion":2,"manifests":[` + entry(docker, 0) + `]}`, false},
		{"short digest", `{"schemaVersion":2,"manifests":[{"mediaType":"` + docker + `","digest":"sha256:12","size":3}]}`, false},
		{"sha512 digest", `{"schemaVersion":2,"manifests":[{"mediaType":"` + docker + `","digest":"sha512:` + strings.Repeat("ab", 64) + `","size":3}]}`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			im, err := parseIndex([]byte(tc.raw))
			if (err == nil) != tc.ok {
				t.Fatalf("parseIndex(%s) = %v, want ok %v", tc.raw, err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrCorrupt) {
				t.Errorf("parseIndex(%s) = %v, want it to wrap ErrCorrupt", tc.raw, err)
			}
			if err == nil && im.Manifests == nil {
				t.Errorf("parseIndex(%s).Manifests = nil, want an empty list", tc.raw)
			}
		})
	}
}
