package images

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/osdcloud/osd/bootstrap/fsutil"
)

// StagedBlob is a blob file ready to move into the store: its content was checked
// against Digest and Size as it was written, and it lies on the store's file system
// (under Dir), so it is renamed, not copied.
type StagedBlob struct {
	Path   string
	Digest v1.Hash
	Size   int64
}

// CommitImport is the store's half of an airgap bundle import (package bundle): it
// moves the staged blobs into the store and then adds imgs, whose manifests are among
// them, to its index (the index write is the commit point: blobs alone are never
// visible as images). Blobs it moved are removed again if the commit fails.
func (s *Store) CommitImport(blobs []StagedBlob, imgs []Stored) (out []Stored, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dst := filepath.Join(s.layoutDir(), "blobs", "sha256")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return nil, fmt.Errorf("import bundle: %w", err)
	}
	var moved []string
	defer func() {
		if err != nil {
			for _, p := range moved {
				os.Remove(p)
			}
		}
	}()
	for _, b := range blobs {
		to := filepath.Join(dst, b.Digest.Hex)
		_, err := os.Lstat(to)
		held := err == nil
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("import bundle: %w", err)
		}
		// The staged copy was verified as it was read: it replaces a blob already held
		// (which may be damaged) instead of trusting it unverified.
		if err := os.Rename(b.Path, to); err != nil {
			return nil, fmt.Errorf("import bundle: %w", err)
		}
		s.trusted(b.Digest, b.Size)
		if !held {
			moved = append(moved, to)
		}
	}
	if err := fsutil.SyncDir(dst); err != nil {
		return nil, fmt.Errorf("import bundle: %w", err)
	}
	out, err = s.indexImported(imgs)
	if err != nil {
		return nil, fmt.Errorf("import bundle: %w", err)
	}
	moved = nil // the index refers to them now
	if err := s.gc(); err != nil {
		return nil, err
	}
	return out, nil
}

// indexImported adds (or replaces, by name) the imported images in the store's index.
func (s *Store) indexImported(sts []Stored) ([]Stored, error) {
	out := make([]Stored, len(sts))
	descs := make([]v1.Descriptor, len(sts))
	for i, st := range sts {
		h, err := v1.NewHash(st.Digest)
		if err != nil {
			return nil, err
		}
		raw, err := os.ReadFile(s.blobFile(h))
		if err != nil {
			return nil, err
		}
		var m v1.Manifest
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("manifest %s: %w", st.Digest, err)
		}
		mt := m.MediaType
		if mt == "" {
			mt = types.OCIManifestSchema1
		}
		descs[i] = v1.Descriptor{MediaType: mt, Digest: h, Size: int64(len(raw)), Annotations: st.Annotations()}
		st.Size = int64(len(raw)) + m.Config.Size
		for _, l := range m.Layers {
			st.Size += l.Size
		}
		out[i] = st
	}
	return out, s.setEntries(descs...)
}
