package bundle

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// stage is the one directory a bundle import writes into, opened once as an os.Root:
// every staged file is created and read through that handle, so no name can reach
// outside the directory even if a check before it were missed. Files are named by
// their 64 hex digits, side by side (no subdirectories).
type stage struct {
	dir   string
	root  *os.Root
	files []string // every file created, for cleanup
}

// newStage makes a fresh directory under parent (mode 0700) and opens it.
func newStage(parent string) (*stage, error) {
	dir, err := os.MkdirTemp(parent, ".import-")
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		os.Remove(dir)
		return nil, err
	}
	return &stage{dir: dir, root: root}, nil
}

// faultReader remembers the error of the reader it wraps, so a failed copy can tell a
// damaged bundle (read side) from a full disk (write side).
type faultReader struct {
	r   io.Reader
	err error
}

func (f *faultReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err != nil && err != io.EOF {
		f.err = err
	}
	return n, err
}

// writeBlob streams the blob from r into the stage while hashing it; it is kept only
// when it has exactly size bytes and the digest hexDigest names. A mismatch or a read
// error is a bundleFault; a write error is returned as it is.
func (s *stage) writeBlob(r io.Reader, hexDigest string, size int64) error {
	f, err := s.root.OpenFile(hexDigest, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("stage blob: %w", err)
	}
	s.files = append(s.files, hexDigest)
	defer f.Close()
	h := sha256.New()
	src := &faultReader{r: io.LimitReader(r, size+1)}
	n, err := io.Copy(io.MultiWriter(f, h), src)
	switch {
	case src.err != nil:
		return faultf("blob sha256:%s: read %d of %d bytes: %v", hexDigest, n, size, src.err)
	case err != nil:
		return fmt.Errorf("stage blob sha256:%s: %w", hexDigest, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != hexDigest || n != size {
		return faultf("blob sha256:%s holds sha256:%s (%d bytes), want %d bytes with the digest of its name", hexDigest, got, n, size)
	}
	if err := f.Sync(); err != nil { // renamed into the store as it is
		return fmt.Errorf("stage blob sha256:%s: %w", hexDigest, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("stage blob sha256:%s: %w", hexDigest, err)
	}
	return nil
}

// readBlob reads a staged blob of at most max bytes.
func (s *stage) readBlob(hexDigest string, max int64) ([]byte, error) {
	f, err := s.root.Open(hexDigest)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("blob sha256:%s is larger than %d bytes", hexDigest, max)
	}
	return b, nil
}

// path is the staged blob's path, for the rename into the store.
func (s *stage) path(hexDigest string) string { return filepath.Join(s.dir, hexDigest) }

// remove deletes every file the stage created (those not moved away), then the
// directory itself.
func (s *stage) remove() error {
	var errs []error
	for _, name := range s.files {
		if err := s.root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	s.root.Close()
	if err := os.Remove(s.dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
