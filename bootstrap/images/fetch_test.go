package images

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/osdcloud/osd/bootstrap/images/oci"
)

// storeSource serves the blobs of a real store the way the cluster's API does (ServedBlob,
// ranges), with faults a test sets: a connection that breaks after some bytes, a source
// that ignores ranges, a corrupted byte.
type storeSource struct {
	st        *Store
	breakAt   int64 // close the body after this many bytes (0: never), once per blob
	broken    map[string]bool
	noResume  bool
	corrupt   bool
	requested []int64 // offsets asked for
	served    int64   // bytes sent
}

func (s *storeSource) Blob(ctx context.Context, h v1.Hash, offset int64) (io.ReadCloser, int64, error) {
	path, _, err := s.st.ServedBlob(h.String())
	if err != nil {
		return nil, 0, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	s.requested = append(s.requested, offset)
	if s.noResume {
		offset = 0
	}
	if s.corrupt && len(data) > 100 {
		data = append([]byte(nil), data...)
		data[len(data)/2] ^= 0xff
	}
	data = data[offset:]
	if s.breakAt > 0 && !s.broken[h.Hex] && int64(len(data)) > s.breakAt {
		s.broken[h.Hex] = true
		data = data[:s.breakAt]
	}
	s.served += int64(len(data))
	return io.NopCloser(bytes.NewReader(data)), offset, nil
}

// servingStore is a store holding one image "compute" with a 2 MB incompressible layer.
func servingStore(t *testing.T) (*Store, Stored) {
	t.Helper()
	st, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 2<<20)
	rand.New(rand.NewSource(7)).Read(data) // test data, not a secret
	img, err := oci.ImageFromFiles([]File{{Path: "data", Mode: 0o644, Data: data}}, ImageConfig{})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := st.Put(img, Stored{Name: "compute", Ref: "localhost/osd/compute:test", RecipeHash: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	return st, stored
}

func TestFetch(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name       string
		src        storeSource
		wantErr    string
		wantOffset bool // a request continued a partial download
	}{
		{name: "whole"},
		{name: "connection breaks: continued", src: storeSource{breakAt: 300 << 10, broken: map[string]bool{}}, wantOffset: true},
		{name: "source cannot resume: started again", src: storeSource{breakAt: 300 << 10, broken: map[string]bool{}, noResume: true}, wantOffset: true},
		{name: "corrupt content refused", src: storeSource{corrupt: true}, wantErr: "does not match its digest"},
	} {
		t.Run(c.name, func(t *testing.T) {
			server, want := servingStore(t)
			c.src.st = server
			member, err := OpenStore(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			got, err := member.Fetch(ctx, &c.src, want)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("Fetch() = %+v, %v, want an error saying %q", got, err, c.wantErr)
				}
				if _, _, err := member.Get("compute"); !errors.Is(err, ErrNotStored) {
					t.Errorf("after a refused fetch, Get(compute) = %v, want ErrNotStored", err)
				}
				if left, _ := os.ReadDir(member.incomingDir()); len(left) != 0 {
					t.Errorf("corrupt download kept: %v", left)
				}
				return
			}
			if err != nil {
				t.Fatalf("Fetch() = %v", err)
			}
			_, st, err := member.Get("compute")
			if err != nil || st.Digest != want.Digest || st.Ref != want.Ref || st.RecipeHash != "r1" {
				t.Fatalf("after Fetch, Get(compute) = %+v, %v, want digest %s ref %s recipe r1", st, err, want.Digest, want.Ref)
			}
			if got.Blobs != 2 || got.Reused != 0 {
				t.Errorf("Fetch() = %+v, want 2 blobs downloaded (config and layer), none reused", got)
			}
			resumed := false
			for _, o := range c.src.requested {
				resumed = resumed || o > 0
			}
			if resumed != c.wantOffset {
				t.Errorf("requests at offsets %v: continued a partial download = %v, want %v", c.src.requested, resumed, c.wantOffset)
			}
			if c.name == "connection breaks: continued" && c.src.served > want.Size+1024 {
				t.Errorf("served %d bytes for an image of %d: the broken download was not continued", c.src.served, want.Size)
			}
			again := storeSource{st: server}
			if got, err := member.Fetch(ctx, &again, want); err != nil || got.Downloaded != 0 || len(again.requested) != 0 {
				t.Errorf("Fetch() of a held image = %+v, %v with %d requests, want nothing done", got, err, len(again.requested))
			}
		})
	}
}

// TestFetchReusesBlobs: an image whose layer the member holds already (another image
// with the same layer) downloads only its manifest and config.
func TestFetchReusesBlobs(t *testing.T) {
	ctx := context.Background()
	server, want := servingStore(t)
	member, _ := OpenStore(t.TempDir())
	src := &storeSource{st: server}
	if _, err := member.Fetch(ctx, src, want); err != nil {
		t.Fatal(err)
	}
	img, _, _ := server.Get("compute")
	if _, err := server.Put(img, Stored{Name: "compute2", Ref: "localhost/osd/compute2:test"}); err != nil {
		t.Fatal(err)
	}
	want2 := want
	want2.Name, want2.Ref = "compute2", "localhost/osd/compute2:test"
	got, err := member.Fetch(ctx, src, want2)
	if err != nil || got.Blobs != 0 || got.Reused != 2 {
		t.Errorf("Fetch(an image of held blobs) = %+v, %v, want 2 reused, none downloaded", got, err)
	}
}

func TestServedBlob(t *testing.T) {
	st, stored := servingStore(t)
	img, _, _ := st.Get("compute")
	m, _ := img.Manifest()
	for _, d := range []string{stored.Digest, m.Config.Digest.String(), m.Layers[0].Digest.String()} {
		if p, size, err := st.ServedBlob(d); err != nil || size <= 0 || filepath.Base(p) != strings.TrimPrefix(d, "sha256:") {
			t.Errorf("ServedBlob(%s) = %s, %d, %v, want its file", d, p, size, err)
		}
	}
	for _, d := range []string{"sha256:" + strings.Repeat("0", 64), "sha256:../../etc/passwd", "md5:abc", "", "sha256:" + strings.Repeat("A", 64)} {
		if p, _, err := st.ServedBlob(d); err == nil {
			t.Errorf("ServedBlob(%q) = %s, want refused", d, p)
		}
	}
}

func TestParseImageManifest(t *testing.T) {
	good := `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","size":10,"digest":"sha256:` + strings.Repeat("a", 64) + `"},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","size":5,"digest":"sha256:` + strings.Repeat("b", 64) + `"}]}`
	for _, c := range []struct {
		name, raw, wantErr string
	}{
		{"oci image", good, ""},
		{"index", strings.Replace(good, "image.manifest.v1", "image.index.v1", 1), "not an image manifest"},
		{"schema 1", strings.Replace(good, `"schemaVersion":2`, `"schemaVersion":1`, 1), "schema version"},
		{"short digest", strings.Replace(good, strings.Repeat("b", 64), "bb", 1), "manifest"},
		{"md5 digest", strings.Replace(good, "sha256:"+strings.Repeat("b", 64), "md5:"+strings.Repeat("b", 32), 1), "manifest"},
		{"garbage", "{", "manifest"},
	} {
		_, err := ParseImageManifest([]byte(c.raw))
		if (err != nil) != (c.wantErr != "") || err != nil && !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("ParseImageManifest(%s) = %v, want error %q", c.name, err, c.wantErr)
		}
	}
}
