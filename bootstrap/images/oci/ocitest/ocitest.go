// Package ocitest reads layers back and makes trees for the tests of the packages that
// pack, store and move images (oci, images, bundle).
package ocitest

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Entry is what the tests compare of a tar header.
type Entry struct {
	Type     byte
	Mode     int64
	UID, GID int
	Link     string
	Size     int64
	Data     string
	Dev      [2]int64
	Xattrs   map[string]string
	ModTime  time.Time
}

// epoch is the time stamp oci gives every entry it packs (oci.Epoch: ocitest must not
// import oci, whose tests use it).
var epoch = time.Unix(0, 0).UTC()

// ReadLayer returns the entries of a layer's uncompressed tar, by name, and the names
// in tar order; an entry whose time stamp is not the epoch is an error. ModTime is not
// filled in.
func ReadLayer(t *testing.T, l v1.Layer) (map[string]Entry, []string) {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatalf("Uncompressed() = %v", err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	got := map[string]Entry{}
	var order []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read layer tar: %v", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(epoch) {
			t.Errorf("layer entry %s mtime = %v, want %v", h.Name, h.ModTime, epoch)
		}
		e := Entry{Type: h.Typeflag, Mode: h.Mode, UID: h.Uid, GID: h.Gid, Link: h.Linkname, Size: h.Size, Dev: [2]int64{h.Devmajor, h.Devminor}}
		if len(data) < 64 {
			e.Data = string(data)
		}
		for k, v := range h.PAXRecords {
			if len(k) > 12 && k[:12] == "SCHILY.xattr" {
				if e.Xattrs == nil {
					e.Xattrs = map[string]string{}
				}
				e.Xattrs[k[13:]] = v
			}
		}
		got[h.Name] = e
		order = append(order, h.Name)
	}
	return got, order
}

// ReadLayerAll is ReadLayer without the epoch check, returning mtimes.
func ReadLayerAll(t *testing.T, l v1.Layer) (map[string]Entry, []string) {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	return ReadTar(t, rc)
}

// ReadTar returns the entries of the tar r, by name, and the names in tar order.
func ReadTar(t *testing.T, r io.Reader) (map[string]Entry, []string) {
	t.Helper()
	tr := tar.NewReader(r)
	got := map[string]Entry{}
	var order []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return got, order
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		data, _ := io.ReadAll(tr)
		e := Entry{Type: h.Typeflag, Mode: h.Mode, UID: h.Uid, GID: h.Gid, Link: h.Linkname, Size: h.Size,
			Dev: [2]int64{h.Devmajor, h.Devminor}, ModTime: h.ModTime}
		if len(data) < 64 {
			e.Data = string(data)
		}
		for k, v := range h.PAXRecords {
			if len(k) > 13 && k[:13] == "SCHILY.xattr." {
				if e.Xattrs == nil {
					e.Xattrs = map[string]string{}
				}
				e.Xattrs[k[13:]] = v
			}
		}
		got[h.Name] = e
		order = append(order, h.Name)
	}
}

// Digest is l's digest as a string.
func Digest(t *testing.T, l v1.Layer) string {
	t.Helper()
	d, err := l.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// MkTree writes files (path -> content; "" content and a trailing / make a directory).
func MkTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, data := range files {
		full := filepath.Join(root, p)
		if p[len(p)-1] == '/' {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
