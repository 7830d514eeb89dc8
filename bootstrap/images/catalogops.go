package images

import (
	"errors"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/osdcloud/osd/bootstrap/images/oci"
)

// Status is one catalog image as `osd images list` shows it.
type Status struct {
	Name   string `json:"name"`
	Ref    string `json:"ref"`
	Digest string `json:"digest,omitempty"`
	Size   int64  `json:"size,omitempty"`
	// Stored: the store holds an image of this name.
	Stored bool `json:"stored"`
	// Cached: the stored image was built from the current recipe (package
	// versions are checked by Build, which may still rebuild it when the
	// mirror moved on).
	Cached bool `json:"cached"`
}

// Select returns the catalog recipes called names (all when empty).
func Select(names ...string) ([]Recipe, error) { return SelectIn(Recipes(), names...) }

// SelectIn returns the recipes of catalog called names (all when empty).
func SelectIn(catalog []Recipe, names ...string) ([]Recipe, error) {
	if len(names) == 0 {
		return catalog, nil
	}
	var out []Recipe
	for _, n := range names {
		r, ok := RecipeByNameIn(catalog, n)
		if !ok {
			return nil, fmt.Errorf("unknown image %q", n)
		}
		out = append(out, r)
	}
	return out, nil
}

// List reports every catalog image and what the store holds for it.
func (b *Builder) List() ([]Status, error) {
	store, err := b.Store()
	if err != nil {
		return nil, err
	}
	stored, err := store.List()
	if err != nil {
		return nil, err
	}
	byName := map[string]Stored{}
	for _, st := range stored {
		byName[st.Name] = st
	}
	var out []Status
	for _, r := range b.catalog() {
		s := Status{Name: r.Name, Ref: r.Ref}
		if st, ok := byName[r.Name]; ok {
			s.Stored, s.Digest, s.Size = true, st.Digest, st.Size
			s.Cached = st.RecipeHash == r.Hash() && st.Ref == r.Ref
		}
		out = append(out, s)
	}
	return out, nil
}

// refsOf returns ref -> image for the named stored images (all if empty).
func (b *Builder) refsOf(names ...string) (map[string]v1.Image, error) {
	store, err := b.Store()
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		all, err := store.List()
		if err != nil {
			return nil, err
		}
		for _, st := range all {
			names = append(names, st.Name)
		}
	}
	refs := map[string]v1.Image{}
	for _, n := range names {
		img, st, err := store.Get(n)
		if err != nil {
			return nil, err
		}
		refs[st.Ref] = img
	}
	if len(refs) == 0 {
		return nil, errors.New("no images built")
	}
	return refs, nil
}

// WriteContainerdArchive writes the named stored images (all if empty) as
// an OCI archive file for containerd: the lead drops it into
// <k3s data-dir>/agent/images/ before k3s starts (written atomically).
func (b *Builder) WriteContainerdArchive(path string, names ...string) error {
	refs, err := b.refsOf(names...)
	if err != nil {
		return err
	}
	return oci.WriteOCIArchiveFile(path, refs)
}
