package bundle

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/osdcloud/osd/bootstrap/fsutil"
	"github.com/osdcloud/osd/bootstrap/images"
)

// ErrBadDestination marks a bundle destination refused before anything is read or written.
var ErrBadDestination = errors.New("bad bundle destination")

// CheckExportPath checks where a bundle is to be written before any work: an absolute
// path whose parent is an existing directory; the path itself not a directory, link or
// special file, not inside the image store (storeDir), and not an existing file unless
// replace is set. It returns the cleaned path; errors wrap ErrBadDestination and say what
// to do.
func CheckExportPath(p string, replace bool, storeDir string) (string, error) {
	bad := func(format string, a ...any) (string, error) {
		return "", fmt.Errorf("%s: %w", fmt.Sprintf(format, a...), ErrBadDestination)
	}
	switch {
	case p == "":
		return bad("no bundle file given: give its absolute path, e.g. /root/osd-images.bundle")
	case strings.ContainsRune(p, 0):
		return bad("bundle path %q holds a NUL byte", p)
	case !filepath.IsAbs(p):
		return bad("bundle path %q is relative: give an absolute path (osd images export resolves it against the current directory)", p)
	case strings.HasSuffix(p, "/") || filepath.Clean(p) == "/":
		return bad("bundle path %s names a directory: give a file name inside it, e.g. %s", p, filepath.Join(p, "osd-images.bundle"))
	}
	p = filepath.Clean(p)
	parent := filepath.Dir(p)
	switch fi, err := os.Stat(parent); {
	case errors.Is(err, fs.ErrNotExist):
		return bad("directory %s does not exist: create it first or choose another path", parent)
	case err != nil:
		return bad("directory %s: %v", parent, err)
	case !fi.IsDir():
		return bad("%s is not a directory: choose a path inside a directory", parent)
	}
	if inside, err := isInside(parent, storeDir); err != nil {
		return bad("%v", err)
	} else if inside {
		return bad("%s is inside the image store %s: write the bundle elsewhere", p, storeDir)
	}
	fi, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return p, nil
	case err != nil:
		return bad("%s: %v", p, err)
	case fi.IsDir():
		return bad("%s is a directory: give a file name inside it, e.g. %s", p, filepath.Join(p, "osd-images.bundle"))
	case fi.Mode()&fs.ModeSymlink != 0:
		return bad("%s is a symbolic link: give the path of a regular file", p)
	case !fi.Mode().IsRegular():
		return bad("%s is a %s, not a regular file: choose another path", p, fileKind(fi.Mode()))
	case !replace:
		return bad("%s already exists: add --force (\"force\": true in the API) to replace it, or choose another path", p)
	}
	return p, nil
}

// isInside reports whether dir (resolved) is storeDir (resolved) or below it.
func isInside(dir, storeDir string) (bool, error) {
	if storeDir == "" {
		return false, nil
	}
	d, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false, fmt.Errorf("directory %s: %w", dir, err)
	}
	s, err := filepath.EvalSymlinks(storeDir)
	if err != nil {
		return false, nil // no store yet: nothing to overwrite
	}
	rel, err := filepath.Rel(s, d)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../"), nil
}

func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	}
	return "special file"
}

// WriteFile writes the bundle of the named images (all when none), compressed, to path through
// a temporary file in the same directory, renamed into place only at the end. Unless
// replace is set, the rename refuses to replace a file that appeared meanwhile
// (RENAME_NOREPLACE), and the error wraps ErrBadDestination.
func WriteFile(path string, replace bool, store *images.Store, names ...string) ([]images.Stored, error) {
	var sel []images.Stored
	err := writeFileAtomicMode(path, replace, func(w io.Writer) error {
		var err error
		sel, err = exportCompressed(w, store, names...)
		return err
	})
	return sel, err
}

// writeFileAtomicMode is writeFileAtomic with the choice to refuse replacing path.
func writeFileAtomicMode(path string, replace bool, write func(io.Writer) error) error {
	if replace {
		return writeFileAtomic(path, write)
	}
	err := fsutil.WriteAtomicNew(path, 0o644, write)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s appeared while the bundle was written: add --force to replace it, or choose another path: %w", path, ErrBadDestination)
	}
	if err != nil {
		return fmt.Errorf("write bundle: %w", err)
	}
	return nil
}

// writeFileAtomic writes path through write with fsutil.WriteAtomic (mode 0644).
func writeFileAtomic(path string, write func(io.Writer) error) error {
	if err := fsutil.WriteAtomic(path, 0o644, write); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
