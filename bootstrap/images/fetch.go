package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// A member of a cluster gets the service images from the cluster instead of building
// them: Fetch copies one image, blob by blob, from a BlobSource (the cluster's API) into
// its own store. Only the blobs the store lacks are downloaded; a download that breaks is
// continued from where it stopped; every blob is checked against its digest and size
// before it enters the store, and the manifest against the digest asked for.

// BlobSource serves blobs by digest.
type BlobSource interface {
	// Blob returns the blob's bytes from offset on, and the offset they really start at:
	// a source that cannot resume starts again at 0.
	Blob(ctx context.Context, digest v1.Hash, offset int64) (body io.ReadCloser, from int64, err error)
}

// Fetched says what Fetch did for one image.
type Fetched struct {
	Name       string        `json:"name"`
	Digest     string        `json:"digest"`
	Downloaded int64         `json:"downloaded"` // bytes received
	Blobs      int           `json:"blobs"`      // blobs downloaded
	Reused     int           `json:"reused"`     // blobs the store had already
	Took       time.Duration `json:"took"`
}

// maxManifest bounds a manifest's size.
const maxManifest = 4 << 20

// blobAttempts is how often one blob's download is tried (each continuing the last).
const blobAttempts = 4

// Fetch makes the store hold want.Name at want.Digest (a manifest digest) with reference
// want.Ref, downloading from src what it lacks. It does nothing when the store holds that
// image at that digest already.
func (s *Store) Fetch(ctx context.Context, src BlobSource, want Stored) (Fetched, error) {
	t0 := time.Now()
	res := Fetched{Name: want.Name, Digest: want.Digest}
	if _, cur, err := s.Get(want.Name); err == nil && cur.Digest == want.Digest && cur.Ref == want.Ref {
		return res, nil
	}
	mh, err := v1.NewHash(want.Digest)
	if err != nil {
		return res, fmt.Errorf("image %s: digest %q: %w", want.Name, want.Digest, err)
	}
	raw, err := s.fetchSmall(ctx, src, mh, maxManifest)
	if err != nil {
		return res, fmt.Errorf("image %s: manifest: %w", want.Name, err)
	}
	m, err := ParseImageManifest(raw)
	if err != nil {
		return res, fmt.Errorf("image %s: %w", want.Name, err)
	}
	for _, d := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		got, err := s.fetchBlob(ctx, src, d.Digest, d.Size)
		if err != nil {
			return res, fmt.Errorf("image %s: blob %s: %w", want.Name, d.Digest, err)
		}
		if got < 0 {
			res.Reused++
			continue
		}
		res.Blobs++
		res.Downloaded += got
	}
	if err := s.putBlobBytes(mh, raw); err != nil {
		return res, fmt.Errorf("image %s: store manifest: %w", want.Name, err)
	}
	res.Downloaded += int64(len(raw))
	img, err := partial.CompressedToImage(&fetchedImage{s: s, raw: raw, m: m})
	if err != nil {
		return res, fmt.Errorf("image %s: %w", want.Name, err)
	}
	if _, err := s.Put(img, Stored{Name: want.Name, Ref: want.Ref, RecipeHash: want.RecipeHash, CacheKey: want.CacheKey}); err != nil {
		return res, err
	}
	res.Took = time.Since(t0)
	return res, nil
}

// fetchedImage is an image whose blobs Fetch put in the store's blob directory, before
// the store's index names it.
type fetchedImage struct {
	s   *Store
	raw []byte
	m   *v1.Manifest
}

func (f *fetchedImage) RawConfigFile() ([]byte, error) {
	return os.ReadFile(f.s.blobFile(f.m.Config.Digest))
}
func (f *fetchedImage) RawManifest() ([]byte, error) { return f.raw, nil }
func (f *fetchedImage) MediaType() (types.MediaType, error) {
	if f.m.MediaType == "" {
		return types.OCIManifestSchema1, nil
	}
	return f.m.MediaType, nil
}

func (f *fetchedImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	for _, d := range append([]v1.Descriptor{f.m.Config}, f.m.Layers...) {
		if d.Digest == h {
			return &fetchedLayer{path: f.s.blobFile(h), d: d}, nil
		}
	}
	return nil, fmt.Errorf("manifest has no blob %s", h)
}

// fetchedLayer is one blob of a fetchedImage, as stored (compressed or not).
type fetchedLayer struct {
	path string
	d    v1.Descriptor
}

func (l *fetchedLayer) Digest() (v1.Hash, error)            { return l.d.Digest, nil }
func (l *fetchedLayer) Size() (int64, error)                { return l.d.Size, nil }
func (l *fetchedLayer) MediaType() (types.MediaType, error) { return l.d.MediaType, nil }
func (l *fetchedLayer) Compressed() (io.ReadCloser, error)  { return os.Open(l.path) }

// ParseImageManifest decodes an image manifest (OCI or Docker v2) and checks that it
// describes one image: a config and layers with sha256 digests and sizes (pure).
func ParseImageManifest(raw []byte) (*v1.Manifest, error) {
	var m v1.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	switch m.MediaType {
	case types.OCIManifestSchema1, types.DockerManifestSchema2, "":
	default:
		return nil, fmt.Errorf("manifest media type %q is not an image manifest", m.MediaType)
	}
	if m.SchemaVersion != 2 {
		return nil, fmt.Errorf("manifest schema version %d, want 2", m.SchemaVersion)
	}
	for _, d := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		if d.Digest.Algorithm != "sha256" || len(d.Digest.Hex) != 64 || d.Size < 0 {
			return nil, fmt.Errorf("manifest lists blob %q of size %d: want a sha256 digest and a size", d.Digest, d.Size)
		}
	}
	return &m, nil
}

// blobFile is where the store keeps blob h.
func (s *Store) blobFile(h v1.Hash) string {
	return filepath.Join(s.layoutDir(), "blobs", h.Algorithm, h.Hex)
}

// incomingDir keeps partial downloads (outside the layout, so its collection never
// sees them).
func (s *Store) incomingDir() string { return filepath.Join(s.dir, "incoming") }

// fetchSmall returns blob h (at most limit bytes) read whole and checked.
func (s *Store) fetchSmall(ctx context.Context, src BlobSource, h v1.Hash, limit int64) ([]byte, error) {
	body, _, err := src.Blob(ctx, h, 0)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	raw, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(raw)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != h.Hex {
		return nil, fmt.Errorf("content does not match its digest (sha256:%x)", sum)
	}
	return raw, nil
}

// fetchBlob makes the store hold blob h of size bytes. It returns how many bytes it
// downloaded, or -1 when the store had the blob.
func (s *Store) fetchBlob(ctx context.Context, src BlobSource, h v1.Hash, size int64) (int64, error) {
	if err := s.verifyBlob(h, size); err == nil {
		return -1, nil
	}
	if err := os.MkdirAll(s.incomingDir(), 0o755); err != nil {
		return 0, err
	}
	part := filepath.Join(s.incomingDir(), h.Hex+".partial")
	var total int64
	var err error
	for attempt := 1; attempt <= blobAttempts; attempt++ {
		var n int64
		n, err = downloadInto(ctx, src, h, size, part)
		total += n
		if err == nil || ctx.Err() != nil || errors.Is(err, errCorrupt) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(attempt) * time.Second):
		}
	}
	if err != nil {
		return total, err
	}
	return total, s.adoptBlob(part, h, size)
}

// errCorrupt marks a download that ended with the wrong content (started again from
// nothing, not resumed).
var errCorrupt = errors.New("downloaded content does not match its digest")

// downloadInto continues the download of blob h into part (a partial file of an earlier
// attempt is kept and continued) and checks size and digest once complete; a corrupt
// result is deleted. It returns the bytes this attempt received.
func downloadInto(ctx context.Context, src BlobSource, h v1.Hash, size int64, part string) (int64, error) {
	f, err := os.OpenFile(part, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	have, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, err
	}
	if have > size {
		have = 0
	}
	var got int64
	if have < size {
		body, from, err := src.Blob(ctx, h, have)
		if err != nil {
			return 0, err
		}
		defer body.Close()
		if from != have {
			have = 0 // the source started again from the beginning
		}
		if err := f.Truncate(have); err != nil {
			return 0, err
		}
		if _, err := f.Seek(have, io.SeekStart); err != nil {
			return 0, err
		}
		got, err = io.Copy(f, io.LimitReader(body, size-have))
		if err != nil {
			return got, err
		}
		if have+got < size {
			return got, fmt.Errorf("%w: got %d of %d bytes", io.ErrUnexpectedEOF, have+got, size)
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return got, err
	}
	hash := sha256.New()
	if _, err := io.Copy(hash, f); err != nil {
		return got, err
	}
	if sum := hex.EncodeToString(hash.Sum(nil)); sum != h.Hex {
		f.Close()
		os.Remove(part)
		return got, fmt.Errorf("%w (sha256:%s)", errCorrupt, sum)
	}
	return got, f.Sync()
}

// ErrNotServed is returned by ServedBlob for a digest no stored image references.
var ErrNotServed = errors.New("no stored image has this blob")

// ServedBlob returns the file of blob digest (sha256:<hex>) and its size, if a stored
// image references it (its manifest, config or a layer): the store serves nothing else.
func (s *Store) ServedBlob(digest string) (string, int64, error) {
	h, err := v1.NewHash(digest)
	if err != nil || h.Algorithm != "sha256" {
		return "", 0, fmt.Errorf("blob digest %q: want sha256:<64 hex digits>", digest)
	}
	s.mu.Lock()
	all, manifests, err := s.list()
	s.mu.Unlock()
	if err != nil {
		return "", 0, err
	}
	for _, st := range all {
		m := manifests[st.Name]
		if st.Digest == h.String() { // verified as list read it
			fi, err := os.Stat(s.blobFile(h))
			if err != nil {
				return "", 0, err
			}
			return s.blobFile(h), fi.Size(), nil
		}
		for _, d := range append([]v1.Descriptor{m.Config}, m.Layers...) {
			if d.Digest != h {
				continue
			}
			// A damaged blob is not served (the member would refuse it after the download).
			if err := s.verifyBlob(h, d.Size); err != nil {
				return "", 0, fmt.Errorf("image %s: %w: build it again on this node", st.Name, err)
			}
			return s.blobFile(h), d.Size, nil
		}
	}
	return "", 0, fmt.Errorf("%s: %w", digest, ErrNotServed)
}
