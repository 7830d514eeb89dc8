package guest

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// extractDeb unpacks the regular files and symbolic links of a .deb's data archive for
// which keep(path) is true (path without the leading "./") under dir, with
// dpkg-deb --fsys-tarfile (dpkg-deb handles every compression Debian uses).
func extractDeb(ctx context.Context, deb, dir string, keep func(string) bool) (int, error) {
	cmd := exec.CommandContext(ctx, "dpkg-deb", "--fsys-tarfile", deb)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("dpkg-deb --fsys-tarfile %s: %w (install the dpkg package)", filepath.Base(deb), err)
	}
	n, terr := untar(out, dir, keep)
	io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		return n, fmt.Errorf("dpkg-deb --fsys-tarfile %s: %w: %s", filepath.Base(deb), err, errb.String())
	}
	return n, terr
}

func untar(r io.Reader, dir string, keep func(string) bool) (int, error) {
	tr := tar.NewReader(r)
	n := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("read package archive: %w", err)
		}
		name := strings.TrimPrefix(filepath.Clean("/"+h.Name), "/")
		if (h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeSymlink) || name == "" || !keep(name) {
			continue
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return n, err
		}
		if h.Typeflag == tar.TypeSymlink {
			// Kept as a link: it is followed only within dir (resolveInRoot).
			os.Remove(p)
			if err := os.Symlink(h.Linkname, p); err != nil {
				return n, err
			}
			n++
			continue
		}
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return n, err
		}
		_, err = io.Copy(f, tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return n, fmt.Errorf("extract %s: %w", name, err)
		}
		n++
	}
}
