package bundle

import (
	"archive/tar"
	"fmt"
	"regexp"
	"strings"

	"github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/bootstrap/images/oci"
)

// What a bundle may hold. Export writes exactly these entries, all regular files:
// bundle.json first, then oci-layout, one blobs/sha256/<hex> per blob, then index.json.
// Import accepts nothing else, so a name from the tar or a digest from bundle.json
// reaches a path only after it matched one of these shapes.
const (
	bundleLayoutName = "oci-layout"
	bundleIndexName  = "index.json"
	bundleBlobPrefix = "blobs/sha256/"
)

// Limits of what import reads. Variables so tests can lower them.
var (
	// maxBundleManifest bounds bundle.json (a few KB for the whole catalog).
	maxBundleManifest int64 = 16 << 20
	// maxBundleSmallEntry bounds oci-layout and index.json, which import reads and drops
	// (the store's index is rebuilt from bundle.json).
	maxBundleSmallEntry int64 = 4 << 20
	// maxBundleTotal bounds the sum of every blob's size (the whole catalog packs to
	// about 1.5 GB).
	maxBundleTotal int64 = 64 << 30
	// maxBundleBlobs and maxBundleImages bound bundle.json's lists.
	maxBundleBlobs  = 4096
	maxBundleImages = 256
	// maxManifestBlob bounds an image manifest read back from the stage.
	maxManifestBlob int64 = 4 << 20
)

var (
	hexDigestRE = regexp.MustCompile(`^[0-9a-f]{64}$`)
	imageNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
)

// digestHex returns the 64 hex digits of a "sha256:<64 lowercase hex>" digest, or an
// error saying what is wrong with it.
func digestHex(d string) (string, error) {
	hex, ok := strings.CutPrefix(d, "sha256:")
	if !ok || !hexDigestRE.MatchString(hex) {
		return "", fmt.Errorf("digest %q is not sha256: followed by 64 lowercase hex digits", clip(d))
	}
	return hex, nil
}

// entryKind is what an allowed tar entry is.
type entryKind int

const (
	entryManifest entryKind = iota
	entryLayout
	entryIndex
	entryBlob
)

// classifyEntry checks one tar header against the allow-list: a regular file with one of
// the names Export writes, not sparse. It returns the entry's kind and, for a blob,
// its hex digest.
func classifyEntry(h *tar.Header) (entryKind, string, error) {
	kind, hex, err := classifyName(h.Name)
	if err != nil {
		return 0, "", err
	}
	if h.Typeflag != tar.TypeReg {
		return 0, "", fmt.Errorf("entry %q is a %s, want a regular file (a bundle holds no links, directories, devices or fifos)", h.Name, typeName(h.Typeflag))
	}
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return 0, "", fmt.Errorf("entry %q is a sparse file, want a regular file", h.Name)
		}
	}
	if h.Size < 0 {
		return 0, "", fmt.Errorf("entry %q has a negative size", h.Name)
	}
	return kind, hex, nil
}

// classifyName matches an entry name exactly against the allow-list (no "./", no
// leading "/", no "..", no directories).
func classifyName(name string) (entryKind, string, error) {
	switch name {
	case bundleManifestName:
		return entryManifest, "", nil
	case bundleLayoutName:
		return entryLayout, "", nil
	case bundleIndexName:
		return entryIndex, "", nil
	}
	if hex, ok := strings.CutPrefix(name, bundleBlobPrefix); ok && hexDigestRE.MatchString(hex) {
		return entryBlob, hex, nil
	}
	return 0, "", fmt.Errorf("entry %q is not part of a bundle (want %s, %s, %s or %s<64 lowercase hex digits>)",
		clip(name), bundleManifestName, bundleLayoutName, bundleIndexName, bundleBlobPrefix)
}

func typeName(t byte) string {
	switch t {
	case tar.TypeSymlink:
		return "symbolic link"
	case tar.TypeLink:
		return "hard link"
	case tar.TypeChar:
		return "character device"
	case tar.TypeBlock:
		return "block device"
	case tar.TypeDir:
		return "directory"
	case tar.TypeFifo:
		return "fifo"
	case tar.TypeGNUSparse:
		return "sparse file"
	}
	return fmt.Sprintf("entry of type %q", t)
}

// checkManifest validates bundle.json before any blob is read: the format version, every
// image's name, reference, digest and annotations, every blob's digest and size, no
// duplicates, and the total size. It returns hex digest -> size of the listed blobs.
func checkManifest(m *Manifest) (map[string]int64, error) {
	if m.Version != bundleVersion {
		return nil, fmt.Errorf("format version %d, want %d", m.Version, bundleVersion)
	}
	if len(m.Images) == 0 {
		return nil, fmt.Errorf("no images listed")
	}
	if len(m.Images) > maxBundleImages || len(m.Blobs) > maxBundleBlobs {
		return nil, fmt.Errorf("%d images and %d blobs listed, more than the %d and %d a bundle may hold", len(m.Images), len(m.Blobs), maxBundleImages, maxBundleBlobs)
	}
	blobs := map[string]int64{}
	var total int64
	for _, b := range m.Blobs {
		hex, err := digestHex(b.Digest)
		if err != nil {
			return nil, fmt.Errorf("blob list: %w", err)
		}
		if _, dup := blobs[hex]; dup {
			return nil, fmt.Errorf("blob %s is listed twice", b.Digest)
		}
		if b.Size < 0 || b.Size > maxBundleTotal-total {
			return nil, fmt.Errorf("blob %s: size %d is negative or takes the bundle over %d bytes", b.Digest, b.Size, maxBundleTotal)
		}
		total += b.Size
		blobs[hex] = b.Size
	}
	names := map[string]bool{}
	for _, st := range m.Images {
		if err := checkStoredEntry(st); err != nil {
			return nil, err
		}
		if names[st.Name] {
			return nil, fmt.Errorf("image %s is listed twice", st.Name)
		}
		names[st.Name] = true
		hex, _ := digestHex(st.Digest)
		if _, ok := blobs[hex]; !ok {
			return nil, fmt.Errorf("image %s: manifest %s is not in the blob list", st.Name, st.Digest)
		}
	}
	return blobs, nil
}

// checkStoredEntry validates one image of bundle.json.
func checkStoredEntry(st images.Stored) error {
	if !imageNameRE.MatchString(st.Name) {
		return fmt.Errorf("image name %q is not lowercase letters, digits, '.', '_' and '-' (at most 63)", clip(st.Name))
	}
	if _, err := digestHex(st.Digest); err != nil {
		return fmt.Errorf("image %s: %w", st.Name, err)
	}
	if _, err := oci.FullRef(st.Ref); err != nil {
		return fmt.Errorf("image %s: %w", st.Name, err)
	}
	for _, a := range [][2]string{{"recipe hash", st.RecipeHash}, {"cache key", st.CacheKey}} {
		what, v := a[0], a[1]
		if len(v) > 256 || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return fmt.Errorf("image %s: %s %q is longer than 256 characters or holds control characters", st.Name, what, clip(v))
		}
	}
	return nil
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}
