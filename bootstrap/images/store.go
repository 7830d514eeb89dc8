package images

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
)

// Index annotations of the image store.
const (
	annotationRefName  = "org.opencontainers.image.ref.name"
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

// Store is an OCI image layout (<dir>/oci) holding one image per name; the
// index annotations carry name, reference, recipe hash and cache key.
type Store struct {
	dir string
	mu  sync.Mutex
}

// OpenStore opens (creating if needed) the image store in dir.
func OpenStore(dir string) (*Store, error) {
	s := &Store{dir: dir}
	p := s.layoutDir()
	if _, err := os.Stat(filepath.Join(p, "index.json")); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, fmt.Errorf("open image store: %w", err)
		}
		if _, err := layout.Write(p, empty.Index); err != nil {
			return nil, fmt.Errorf("open image store: %w", err)
		}
	}
	return s, nil
}

func (s *Store) layoutDir() string { return filepath.Join(s.dir, "oci") }
func (s *Store) path() layout.Path { return layout.Path(s.layoutDir()) }

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

// List returns the stored images sorted by name.
func (s *Store) List() ([]Stored, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.list()
}

func (s *Store) list() ([]Stored, error) {
	ii, err := s.path().ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("read image store: %w", err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("read image store: %w", err)
	}
	var out []Stored
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
		img, err := ii.Image(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("read image %s: %w", st.Name, err)
		}
		if st.Size, err = imageSize(img); err != nil {
			return nil, fmt.Errorf("read image %s: %w", st.Name, err)
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Get returns the stored image called name.
func (s *Store) Get(name string) (v1.Image, Stored, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.get(name)
}

// ErrNotStored is returned by Get for a name the store does not hold.
var ErrNotStored = errors.New("image not in store")

func (s *Store) get(name string) (v1.Image, Stored, error) {
	all, err := s.list()
	if err != nil {
		return nil, Stored{}, err
	}
	for _, st := range all {
		if st.Name != name {
			continue
		}
		h, err := v1.NewHash(st.Digest)
		if err != nil {
			return nil, Stored{}, err
		}
		img, err := s.path().Image(h)
		if err != nil {
			return nil, Stored{}, fmt.Errorf("read image %s: %w", name, err)
		}
		return img, st, nil
	}
	return nil, Stored{}, fmt.Errorf("%s: %w", name, ErrNotStored)
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
	ann := map[string]string{
		annotationRefName:  st.Ref,
		annotationImage:    st.Name,
		annotationRecipe:   st.RecipeHash,
		annotationCacheKey: st.CacheKey,
	}
	if err := s.path().ReplaceImage(img, match.Annotation(annotationImage, st.Name), layout.WithAnnotations(ann)); err != nil {
		return st, fmt.Errorf("store image %s: %w", st.Name, err)
	}
	if err := s.gc(); err != nil {
		return st, fmt.Errorf("store image %s: %w", st.Name, err)
	}
	return st, nil
}

// adoptLayerFiles renames file-backed layers into the blob directory, so a
// 500 MB layer is not copied once more.
func (s *Store) adoptLayerFiles(img v1.Image) error {
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		bl, ok := l.(*blobLayer)
		if !ok || bl.path == "" {
			continue
		}
		dst := filepath.Join(s.layoutDir(), "blobs", bl.digest.Algorithm, bl.digest.Hex)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.Rename(bl.path, dst); err != nil {
			return fmt.Errorf("move layer into the store: %w", err)
		}
		bl.path = dst
	}
	return nil
}

// gc removes blobs that no index entry references.
func (s *Store) gc() error {
	unused, err := s.path().GarbageCollect() // lists, does not delete
	if err != nil {
		return fmt.Errorf("collect unused blobs: %w", err)
	}
	for _, h := range unused {
		if err := s.path().RemoveBlob(h); err != nil {
			return fmt.Errorf("collect unused blobs: %w", err)
		}
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
