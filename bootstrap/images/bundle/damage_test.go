package bundle

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/osdcloud/osd/bootstrap/images"
)

// TestImportReplacesDamagedBlob: importing a bundle over a store that holds one of its
// blobs damaged leaves the bundle's (verified) copy, not the damaged one.
func TestImportReplacesDamagedBlob(t *testing.T) {
	src := smallStore(t)
	bundle := filepath.Join(t.TempDir(), "osd-images.bundle")
	if _, err := ExportFile(bundle, src); err != nil {
		t.Fatal(err)
	}
	img, _, _ := src.Get("a")
	m, _ := img.Manifest()
	layer := blobFile(src, m.Layers[0].Digest)
	flipByte(t, layer)
	fresh, _ := images.OpenStore(src.Dir())
	if _, err := Import(bundle, fresh); err != nil {
		t.Fatal(err)
	}
	if !fileDigestOK(layer) {
		t.Errorf("after the import, layer %s is still damaged", filepath.Base(layer))
	}
	if _, _, err := fresh.Get("a"); err != nil {
		t.Errorf("Get(a) after the import = %v", err)
	}
}

// blobFile is where store keeps the blob h (its OCI image layout under Dir).
func blobFile(store *images.Store, h v1.Hash) string {
	return filepath.Join(store.Dir(), "oci", "blobs", h.Algorithm, h.Hex)
}

func flipByte(t *testing.T, p string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x55
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// fileDigestOK says whether the blob file p holds the content its name says.
func fileDigestOK(p string) bool {
	b, err := os.ReadFile(p)
	if err != nil {
		return false
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]) == filepath.Base(p)
}
