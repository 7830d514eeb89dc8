package bundle

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/osdcloud/osd/bootstrap/images"
)

// TestCheckExportPath checks every destination a bundle export is refused or allowed,
// before any work, with a message saying what to do.
func TestCheckExportPath(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "cache", "images")
	if err := os.MkdirAll(filepath.Join(store, "oci", "blobs"), 0o755); err != nil {
		t.Fatal(err)
	}
	existing := filepath.Join(dir, "old.bundle")
	if err := os.WriteFile(existing, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.bundle")
	if err := os.Symlink(existing, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	storeLink := filepath.Join(dir, "store-link")
	if err := os.Symlink(store, storeLink); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path    string
		replace bool
		want    string // "" = allowed
	}{
		{filepath.Join(dir, "new.bundle"), false, ""},
		{dir + "/./sub/../new.bundle", false, ""},
		{existing, true, ""},
		{"", false, "no bundle file given"},
		{"osd.bundle", false, "is relative: give an absolute path"},
		{"/", false, "names a directory: give a file name inside it"},
		{dir + "/", false, "names a directory: give a file name inside it"},
		{"/etc", false, "/etc is a directory: give a file name inside it, e.g. /etc/osd-images.bundle"},
		{"/etc", true, "/etc is a directory"},
		{dir, true, "is a directory"},
		{filepath.Join(dir, "missing", "x.bundle"), false, "does not exist: create it first"},
		{filepath.Join(existing, "x.bundle"), false, "is not a directory"},
		{existing, false, "already exists: add --force"},
		{link, true, "is a symbolic link"},
		{fifo, true, "is a fifo, not a regular file"},
		{filepath.Join(store, "oci", "index.json"), true, "is inside the image store"},
		{filepath.Join(store, "oci", "blobs", "x"), true, "is inside the image store"},
		{filepath.Join(storeLink, "oci", "y"), true, "is inside the image store"},
		{filepath.Join(dir, "cache", "x", "..", "images", "z"), true, "is inside the image store"},
		{"/tmp/a\x00b", false, "NUL byte"},
	}
	for _, tc := range tests {
		got, err := CheckExportPath(tc.path, tc.replace, store)
		if tc.want == "" {
			if err != nil || got != filepath.Clean(tc.path) {
				t.Errorf("CheckExportPath(%q, %v) = %q, %v; want %q", tc.path, tc.replace, got, err, filepath.Clean(tc.path))
			}
			continue
		}
		if !errors.Is(err, ErrBadDestination) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckExportPath(%q, %v) = %q, %v; want ErrBadDestination saying %q", tc.path, tc.replace, got, err, tc.want)
		}
	}
}

// TestWriteBundleFileReplace: without replace an existing file is kept (even one that
// appears after the check) and no temporary file is left; with replace it is replaced.
func TestWriteBundleFileReplace(t *testing.T) {
	src := smallStore(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "b.bundle")
	if err := os.WriteFile(path, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteFile(path, false, src, "pause"); !errors.Is(err, ErrBadDestination) || !strings.Contains(err.Error(), "add --force") {
		t.Errorf("WriteFile(existing, no replace) = %v, want ErrBadDestination saying add --force", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "keep me" {
		t.Errorf("existing file = %q after a refused export, want it unchanged", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("directory holds %d entries after a refused export, want only the old file", len(ents))
	}
	if _, err := WriteFile(path, false, src, "nope"); !errors.Is(err, images.ErrNotStored) {
		t.Errorf("WriteFile(unbuilt image) = %v, want images.ErrNotStored", err)
	}
	if sel, err := WriteFile(path, true, src, "pause"); err != nil || len(sel) != 1 {
		t.Fatalf("WriteFile(existing, replace) = %d images, %v; want 1", len(sel), err)
	}
	dst, err := images.OpenStore(filepath.Join(t.TempDir(), "fresh"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Import(path, dst); err != nil || len(got) != 1 {
		t.Errorf("Import(replaced file) = %d images, %v; want 1", len(got), err)
	}
	fresh := filepath.Join(dir, "new.bundle")
	if sel, err := WriteFile(fresh, false, src); err != nil || len(sel) != 3 {
		t.Errorf("WriteFile(new file) = %d images, %v; want 3", len(sel), err)
	}
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("new bundle = %v, %v; want mode 0644", fi, err)
	}
}
