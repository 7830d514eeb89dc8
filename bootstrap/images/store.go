package images

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/partial"

	"github.com/osdcloud/osd/bootstrap/images/oci"
)

// Index annotations of the image store.
const (
	annotationRefName  = oci.AnnotationRefName
	annotationImage    = LabelImage
	annotationRecipe   = LabelRecipe
	annotationCacheKey = "org.osdcloud.osd.cachekey"
)

// Stored describes one image in a Store.
type Stored struct {
	Name       string `json:"name"`
	Ref        string `json:"ref"`
	Digest     string `json:"digest"` // manifest digest (sha256:...)
	Size       int64  `json:"size"`   // manifest + config + compressed layers, bytes
	RecipeHash string `json:"recipeHash"`
	CacheKey   string `json:"cacheKey"`
}

// Annotations are the index annotations the store keeps st under: name, reference,
// recipe hash and cache key (a bundle carries them, so an import restores them).
func (st Stored) Annotations() map[string]string {
	return map[string]string{
		annotationRefName:  st.Ref,
		annotationImage:    st.Name,
		annotationRecipe:   st.RecipeHash,
		annotationCacheKey: st.CacheKey,
	}
}

// Store is an OCI image layout (<dir>/oci) holding one image per name; the
// index annotations carry name, reference, recipe hash and cache key.
//
// It survives a crash: index.json and every blob are written through a synced
// temporary file renamed into place with the directory synced (fsutil), so a file
// at its final name is whole. What a crash of older code, a failing disk or a hand
// may still have left is caught before use (verify.go): a blob is checked against
// its digest and size the first time this process uses it, a damaged image is
// dropped from the store (the next build builds it again) and a damaged index.json
// is moved aside for a fresh one.
type Store struct {
	dir string
	mu  sync.Mutex

	checks sync.Map // hex digest -> *blobCheck: blobs verified by this process
}

// OpenStore opens (creating if needed) the image store in dir. A damaged index.json
// is moved aside (index.json.corrupt) and replaced by an empty one, with a warning.
func OpenStore(dir string) (*Store, error) {
	s := &Store{dir: dir}
	if err := s.init(); err != nil {
		return nil, fmt.Errorf("open image store: %w", err)
	}
	if _, err := s.index(); err != nil {
		return nil, fmt.Errorf("open image store: %w", err)
	}
	return s, nil
}

func (s *Store) layoutDir() string { return filepath.Join(s.dir, "oci") }
func (s *Store) path() layout.Path { return layout.Path(s.layoutDir()) }
func (s *Store) indexFile() string { return filepath.Join(s.layoutDir(), "index.json") }

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// BlobPath is the file that holds blob h in the store ("" when it holds none).
func (s *Store) BlobPath(h v1.Hash) string {
	p := filepath.Join(s.layoutDir(), "blobs", h.Algorithm, h.Hex)
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// List returns the stored images sorted by name (an image whose manifest is damaged is
// dropped from the store, not listed).
func (s *Store) List() ([]Stored, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all, _, err := s.list()
	return all, err
}

// list returns the stored images and their manifests, by name.
func (s *Store) list() ([]Stored, map[string]*v1.Manifest, error) {
	im, err := s.index()
	if err != nil {
		return nil, nil, err
	}
	var out []Stored
	manifests := map[string]*v1.Manifest{}
	for _, d := range im.Manifests {
		st := Stored{
			Name:       d.Annotations[annotationImage],
			Ref:        d.Annotations[annotationRefName],
			Digest:     d.Digest.String(),
			RecipeHash: d.Annotations[annotationRecipe],
			CacheKey:   d.Annotations[annotationCacheKey],
		}
		if st.Name == "" {
			continue
		}
		m, raw, err := s.readManifest(d)
		if err != nil {
			if err := s.drop(st.Name, d.Digest, err); err != nil {
				return nil, nil, err
			}
			continue
		}
		st.Size = int64(len(raw)) + m.Config.Size
		for _, l := range m.Layers {
			st.Size += l.Size
		}
		out = append(out, st)
		manifests[st.Name] = m
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, manifests, nil
}

// Get returns the stored image called name, its config and layers verified (once per
// process each). A damaged image is dropped from the store: the error then wraps both
// ErrCorrupt and ErrNotStored (a build builds it again).
func (s *Store) Get(name string) (v1.Image, Stored, error) {
	s.mu.Lock()
	st, m, err := s.find(name)
	s.mu.Unlock()
	if err != nil {
		return nil, Stored{}, err
	}
	h, err := v1.NewHash(st.Digest)
	if err != nil {
		return nil, Stored{}, err
	}
	// Hashing a gigabyte takes seconds: not under the store's lock.
	n, took, err := s.verifyImage(m)
	if n >= 1<<20 {
		slog.Info("image store: verified an image's blobs (once per process)", "image", name, "MB", n>>20, "took", took.Round(time.Millisecond))
	}
	if err != nil {
		s.mu.Lock()
		derr := s.drop(name, h, err)
		s.mu.Unlock()
		if derr != nil {
			return nil, Stored{}, derr
		}
		return nil, Stored{}, fmt.Errorf("image %s: %w (it was dropped from the store: build it again, or import it again): %w: %w", name, err, ErrCorrupt, ErrNotStored)
	}
	img, err := s.path().Image(h)
	if err != nil {
		return nil, Stored{}, fmt.Errorf("read image %s: %w", name, err)
	}
	return img, st, nil
}

// ErrNotStored is returned by Get for a name the store does not hold.
var ErrNotStored = errors.New("image not in store")

// find returns the stored image called name and its manifest.
func (s *Store) find(name string) (Stored, *v1.Manifest, error) {
	all, manifests, err := s.list()
	if err != nil {
		return Stored{}, nil, err
	}
	for _, st := range all {
		if st.Name == name {
			return st, manifests[name], nil
		}
	}
	return Stored{}, nil, fmt.Errorf("%s: %w", name, ErrNotStored)
}

// Put stores img under st.Name (replacing an older image of that name) and
// removes blobs no image uses any more. File-backed layers are moved into
// the layout instead of copied. It returns st with Digest and Size filled.
func (s *Store) Put(img v1.Image, st Stored) (Stored, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, err := img.Digest()
	if err != nil {
		return st, fmt.Errorf("store image %s: %w", st.Name, err)
	}
	st.Digest = d.String()
	if st.Size, err = imageSize(img); err != nil {
		return st, fmt.Errorf("store image %s: %w", st.Name, err)
	}
	if err := s.adoptLayerFiles(img); err != nil {
		return st, fmt.Errorf("store image %s: %w", st.Name, err)
	}
	if err := s.writeImage(img); err != nil {
		return st, fmt.Errorf("store image %s: %w", st.Name, err)
	}
	desc, err := partial.Descriptor(img)
	if err != nil {
		return st, fmt.Errorf("store image %s: %w", st.Name, err)
	}
	desc.Annotations = st.Annotations()
	if err := s.setEntries(*desc); err != nil {
		return st, fmt.Errorf("store image %s: %w", st.Name, err)
	}
	if err := s.gc(); err != nil {
		return st, fmt.Errorf("store image %s: %w", st.Name, err)
	}
	return st, nil
}

// writeImage writes the blobs of img the store lacks (or holds damaged): layers, config,
// then the manifest, each whole or not at all.
func (s *Store) writeImage(img v1.Image) error {
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		size, err := l.Size()
		if err != nil {
			return err
		}
		if s.verifyBlob(d, size) == nil {
			continue
		}
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		err = s.writeBlob(d, size, rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("layer %s: %w", d, err)
		}
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		return err
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	if err := s.putBlobBytes(cfgName, cfg); err != nil {
		return fmt.Errorf("config %s: %w", cfgName, err)
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return err
	}
	if err := s.putBlobBytes(d, raw); err != nil {
		return fmt.Errorf("manifest %s: %w", d, err)
	}
	return nil
}

// putBlobBytes writes a small blob unless the store holds it intact.
func (s *Store) putBlobBytes(h v1.Hash, data []byte) error {
	if s.verifyBlob(h, int64(len(data))) == nil {
		return nil
	}
	return s.writeBlob(h, int64(len(data)), bytes.NewReader(data))
}

// setEntries puts descs into the index, each replacing the entry of the same image name.
func (s *Store) setEntries(descs ...v1.Descriptor) error {
	im, err := s.index()
	if err != nil {
		return err
	}
	for _, desc := range descs {
		name := desc.Annotations[annotationImage]
		i := slicesIndex(im.Manifests, func(d v1.Descriptor) bool { return d.Annotations[annotationImage] == name })
		if i < 0 {
			im.Manifests = append(im.Manifests, desc)
		} else {
			im.Manifests[i] = desc
		}
	}
	return s.writeIndex(im)
}

func slicesIndex(ds []v1.Descriptor, f func(v1.Descriptor) bool) int {
	for i, d := range ds {
		if f(d) {
			return i
		}
	}
	return -1
}

// adoptLayerFiles renames file-backed layers into the blob directory, so a
// 500 MB layer is not copied once more (their digest was computed as they were written).
func (s *Store) adoptLayerFiles(img v1.Image) error {
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		bl, ok := l.(*oci.BlobLayer)
		if !ok {
			continue
		}
		d, _ := bl.Digest()
		size, _ := bl.Size()
		if bl.File() == "" || bl.File() == s.blobFile(d) {
			continue
		}
		if err := s.adoptBlob(bl.File(), d, size); err != nil {
			return fmt.Errorf("move layer into the store: %w", err)
		}
		bl.MovedTo(s.blobFile(d))
	}
	return nil
}

// gc removes the blobs that no index entry references, and whatever else lies in the
// blob directory (a leftover of a crash of older code).
func (s *Store) gc() error {
	im, err := s.index()
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, d := range im.Manifests {
		keep[d.Digest.Hex] = true
		m, _, err := s.readManifest(d)
		if err != nil {
			continue // dropped when next listed; its other blobs cannot be known
		}
		keep[m.Config.Digest.Hex] = true
		for _, l := range m.Layers {
			keep[l.Digest.Hex] = true
		}
	}
	dir := filepath.Join(s.layoutDir(), "blobs", "sha256")
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("collect unused blobs: %w", err)
	}
	for _, e := range ents {
		if keep[e.Name()] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("collect unused blobs: %w", err)
		}
		s.checks.Delete(e.Name())
	}
	return nil
}

// imageSize is the bytes an image takes in a store or bundle.
func imageSize(img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return 0, err
	}
	n := int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n, nil
}
