package images

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/osdcloud/osd/bootstrap/fsutil"
)

// What the store trusts, and when: a file at its final name was written whole (Store),
// but a crash of older code (which wrote in place), a failing disk or a hand can leave a
// short or changed file there. So a blob is checked against its size and sha256 digest
// before its first use in a process (then remembered: blobs are never changed in place),
// the manifest on every read (it is small), and index.json on every read.

// ErrCorrupt marks an image of the store, or its index, that failed verification.
var ErrCorrupt = errors.New("damaged image store")

// BlobError says what is wrong with one blob of the store.
type BlobError struct {
	Digest v1.Hash
	Path   string
	What   string // e.g. "is 12 bytes, want 4096"
}

func (e *BlobError) Error() string { return fmt.Sprintf("blob %s (%s) %s", e.Digest, e.Path, e.What) }

// blobCheck is one blob's verification in this process (mu serialises it, so two images
// sharing a layer hash it once).
type blobCheck struct {
	mu   sync.Mutex
	size int64 // verified at this size; -1 not verified
}

// verifyStats counts the bytes hashed to verify blobs (for the tests).
var verifyStats struct {
	bytes atomic.Int64
}

func (s *Store) check(h v1.Hash) *blobCheck {
	c, _ := s.checks.LoadOrStore(h.Hex, &blobCheck{size: -1})
	return c.(*blobCheck)
}

// trusted records that blob h of size bytes was just written (or moved) into place with
// content whose digest was checked.
func (s *Store) trusted(h v1.Hash, size int64) {
	c := s.check(h)
	c.mu.Lock()
	c.size = size
	c.mu.Unlock()
}

// verifyBlob checks that the store holds blob h with size bytes and the content its
// digest names (hashed once per process; a *BlobError otherwise).
func (s *Store) verifyBlob(h v1.Hash, size int64) error {
	_, err := s.verifyBlobN(h, size)
	return err
}

// verifyBlobN is verifyBlob that also says how many bytes it hashed (0: trusted already).
func (s *Store) verifyBlobN(h v1.Hash, size int64) (int64, error) {
	if h.Algorithm != "sha256" || len(h.Hex) != 64 {
		return 0, &BlobError{Digest: h, Path: s.blobFile(h), What: "has a digest this store does not use"}
	}
	c := s.check(h)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.size == size {
		return 0, nil
	}
	p := s.blobFile(h)
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, &BlobError{Digest: h, Path: p, What: "is missing"}
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if !fi.Mode().IsRegular() {
		return 0, &BlobError{Digest: h, Path: p, What: "is not a regular file"}
	}
	if fi.Size() != size {
		return 0, &BlobError{Digest: h, Path: p, What: fmt.Sprintf("is %d bytes, want %d (truncated or overwritten)", fi.Size(), size)}
	}
	sum := sha256.New()
	n, err := io.Copy(sum, f)
	if err != nil {
		return n, fmt.Errorf("verify blob %s: %w", p, err)
	}
	verifyStats.bytes.Add(n)
	if got := hex.EncodeToString(sum.Sum(nil)); got != h.Hex {
		return n, &BlobError{Digest: h, Path: p, What: fmt.Sprintf("holds content of digest sha256:%s (corrupt)", got)}
	}
	c.size = size
	return n, nil
}

// verifyImage verifies the config and layers of manifest m (the manifest itself was
// verified as it was read) and says how many bytes it hashed and how long that took.
func (s *Store) verifyImage(m *v1.Manifest) (int64, time.Duration, error) {
	t0 := time.Now()
	var total int64
	for _, d := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		n, err := s.verifyBlobN(d.Digest, d.Size)
		total += n
		if err != nil {
			return total, time.Since(t0), err
		}
	}
	return total, time.Since(t0), nil
}

// readManifest reads and checks the manifest an index entry names: its bytes against the
// entry's size and digest, then its content.
func (s *Store) readManifest(d v1.Descriptor) (*v1.Manifest, []byte, error) {
	p := s.blobFile(d.Digest)
	raw, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, &BlobError{Digest: d.Digest, Path: p, What: "is missing"}
	}
	if err != nil {
		return nil, nil, err
	}
	if int64(len(raw)) != d.Size {
		return nil, nil, &BlobError{Digest: d.Digest, Path: p, What: fmt.Sprintf("is %d bytes, want %d (truncated or overwritten)", len(raw), d.Size)}
	}
	if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != d.Digest.Hex {
		return nil, nil, &BlobError{Digest: d.Digest, Path: p, What: fmt.Sprintf("holds content of digest sha256:%x (corrupt)", sum)}
	}
	m, err := ParseImageManifest(raw)
	if err != nil {
		return nil, nil, &BlobError{Digest: d.Digest, Path: p, What: err.Error()}
	}
	s.trusted(d.Digest, d.Size)
	return m, raw, nil
}

// drop removes the image called name from the index (if its entry still names digest)
// after its verification failed with why, and deletes the damaged blob: nothing can
// use it, and a build writes it again.
func (s *Store) drop(name string, digest v1.Hash, why error) error {
	im, err := s.index()
	if err != nil {
		return err
	}
	i := slicesIndex(im.Manifests, func(d v1.Descriptor) bool {
		return d.Annotations[annotationImage] == name && d.Digest == digest
	})
	if i < 0 {
		return nil // replaced meanwhile
	}
	slog.Warn("image store: dropping a damaged image; the next build builds it again", "image", name, "err", why)
	im.Manifests = append(im.Manifests[:i], im.Manifests[i+1:]...)
	if err := s.writeIndex(im); err != nil {
		return err
	}
	var be *BlobError
	if errors.As(why, &be) && be.Path == s.blobFile(be.Digest) {
		os.Remove(be.Path)
		s.checks.Delete(be.Digest.Hex)
	}
	return nil
}

// init creates the layout's directories and oci-layout file if missing.
func (s *Store) init() error {
	if err := os.MkdirAll(filepath.Join(s.layoutDir(), "blobs", "sha256"), 0o755); err != nil {
		return err
	}
	// Blobs whose write a crash cut short (partial downloads are continued, not removed).
	if tmps, _ := filepath.Glob(filepath.Join(s.incomingDir(), "*.tmp-*")); len(tmps) > 0 {
		for _, t := range tmps {
			os.Remove(t)
		}
	}
	p := filepath.Join(s.layoutDir(), "oci-layout")
	if b, err := os.ReadFile(p); err == nil && json.Valid(b) {
		return nil
	}
	return fsutil.WriteAtomic(p, 0o644, func(w io.Writer) error {
		_, err := io.WriteString(w, `{"imageLayoutVersion": "1.0.0"}`)
		return err
	})
}

// index reads index.json (a missing one is an empty index). A damaged one (not an OCI
// image index, or naming blobs in a way this store never writes) is moved aside to
// index.json.corrupt and replaced by an empty index, with a warning naming both files:
// the images it listed are built again by the next build.
func (s *Store) index() (*v1.IndexManifest, error) {
	p := s.indexFile()
	raw, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		im := emptyIndex()
		return im, s.writeIndex(im)
	}
	if err != nil {
		return nil, fmt.Errorf("read image store index: %w", err)
	}
	im, perr := parseIndex(raw)
	if perr == nil {
		return im, nil
	}
	kept := p + ".corrupt"
	slog.Warn("image store: index.json is damaged; moved aside and started empty: the next build builds every image again",
		"file", p, "kept", kept, "err", perr)
	if err := os.Rename(p, kept); err != nil {
		return nil, fmt.Errorf("image store index %s is damaged (%v) and cannot be moved aside: %w; remove it by hand and build the images again", p, perr, err)
	}
	im = emptyIndex()
	return im, s.writeIndex(im)
}

func emptyIndex() *v1.IndexManifest {
	return &v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{}}
}

// parseIndex decodes index.json and checks it is what Store writes: schema version 2,
// every entry an image manifest with a sha256 digest and a size (pure).
func parseIndex(raw []byte) (*v1.IndexManifest, error) {
	var im v1.IndexManifest
	if err := json.Unmarshal(raw, &im); err != nil {
		return nil, fmt.Errorf("%w: not an image index in JSON (%d bytes): %v", ErrCorrupt, len(raw), err)
	}
	if im.SchemaVersion != 2 {
		return nil, fmt.Errorf("%w: index schema version %d, want 2", ErrCorrupt, im.SchemaVersion)
	}
	for _, d := range im.Manifests {
		if d.Digest.Algorithm != "sha256" || len(d.Digest.Hex) != 64 || d.Size <= 0 || d.Size > maxManifest || (d.MediaType != "" && !d.MediaType.IsImage()) {
			return nil, fmt.Errorf("%w: index entry %q (%s, %d bytes) is not an image manifest this store writes", ErrCorrupt, d.Digest, d.MediaType, d.Size)
		}
	}
	if im.Manifests == nil {
		im.Manifests = []v1.Descriptor{}
	}
	return &im, nil
}

// writeIndex writes index.json atomically.
func (s *Store) writeIndex(im *v1.IndexManifest) error {
	data, err := json.MarshalIndent(im, "", "   ")
	if err != nil {
		return err
	}
	if err := fsutil.WriteAtomic(s.indexFile(), 0o644, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}); err != nil {
		return fmt.Errorf("write image store index: %w", err)
	}
	return nil
}

// writeBlob writes blob h from r through a temporary file outside the layout, checked
// against size and digest, synced and renamed into place (fsutil.RenameDurable).
func (s *Store) writeBlob(h v1.Hash, size int64, r io.Reader) (err error) {
	if err := os.MkdirAll(s.incomingDir(), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(s.incomingDir(), h.Hex+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	sum := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, sum), r)
	if err != nil {
		return err
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != h.Hex || n != size {
		return fmt.Errorf("%w: content of %d bytes has digest sha256:%s, want %d bytes of %s", ErrCorrupt, n, got, size, h)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return s.adoptBlob(tmp.Name(), h, size)
}

// adoptBlob moves the file src, whose content has digest h and size bytes (checked by
// the caller), to its place in the layout.
func (s *Store) adoptBlob(src string, h v1.Hash, size int64) error {
	if err := fsutil.RenameDurable(src, s.blobFile(h)); err != nil {
		return err
	}
	s.trusted(h, size)
	return nil
}
