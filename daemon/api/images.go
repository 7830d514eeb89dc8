package api

// ImagesRequest names images (all of the catalog when empty) and, for export and import,
// a bundle file on the daemon's host. Force lets an export replace an existing file.
type ImagesRequest struct {
	Names []string `json:"names,omitempty"`
	Path  string   `json:"path,omitempty"`
	Force bool     `json:"force,omitempty"`
}

// ImageStatus is one catalog image as GET /1.0/images lists it.
type ImageStatus struct {
	Name   string `json:"name"`
	Ref    string `json:"ref"`
	Digest string `json:"digest,omitempty"`
	Size   int64  `json:"size,omitempty"`
	Stored bool   `json:"stored"` // the store holds an image of this name
	Cached bool   `json:"cached"` // ... built from the current recipe
}

// StoredImage is one image in the image store (an export's or import's result).
type StoredImage struct {
	Name       string `json:"name"`
	Ref        string `json:"ref"`
	Digest     string `json:"digest"`
	Size       int64  `json:"size"`
	RecipeHash string `json:"recipeHash"`
	CacheKey   string `json:"cacheKey"`
}
