package charts

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// testLayer makes a layer of entries: "dir/" a directory, "name=content" a file,
// "name->target" a symbolic link, "name=>target" a hard link.
func testLayer(t *testing.T, entries ...string) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Mode: 0o644, ModTime: time.Unix(1, 0), Format: tar.FormatPAX}
		var data string
		switch {
		case strings.HasSuffix(e, "/"):
			h.Name, h.Typeflag, h.Mode = e, tar.TypeDir, 0o755
		case strings.Contains(e, "=>"):
			h.Name, h.Linkname, _ = strings.Cut(e, "=>")
			h.Typeflag = tar.TypeLink
		case strings.Contains(e, "->"):
			h.Name, h.Linkname, _ = strings.Cut(e, "->")
			h.Typeflag = tar.TypeSymlink
		default:
			h.Name, data, _ = strings.Cut(e, "=")
			h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestUnpackImageLayers checks the two views the image tests take of a multi-layer image
// (unpackImage's directory and readImageTree's flattened headers) against what a container
// runtime shows: whiteouts remove a file and a whole directory, an opaque directory hides
// what lower layers put in it (also one whose name starts with a dot), a directory
// replaced by a file and a file by a directory, an overwritten file with a hard link to
// the old one.
func TestUnpackImageLayers(t *testing.T) {
	if _, err := os.Stat("/bin/tar"); err != nil {
		t.Fatalf("tar is not installed: %v", err)
	}
	img, err := mutate.AppendLayers(empty.Image,
		testLayer(t, "a/", "a/x=x1", "a/y=y1", "b/", "b/z=z1", "c=c1", "d/", "d/e=e1", "keep=k1", "hl=>keep", "s->a/y", ".config/", ".config/f=f1", "q/", "q/r=r1"),
		testLayer(t, "a/.wh.x", "b/.wh..wh..opq", "b/new=n2", "c/", "c/f=f2", "d=d2", "keep=k2", ".config/.wh..wh..opq", "q/.wh.r", "q/r2=r2"),
		testLayer(t, ".wh.a", "s2->keep"),
	)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".config/", "b/", "b/new=n2", "c/", "c/f=f2", "d=d2", "hl=k1", "keep=k2", "q/", "q/r2=r2", "s->a/y", "s2->keep"}

	dir := t.TempDir()
	unpackImage(t, img, dir)
	var got []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.IsDir():
			got = append(got, rel+"/")
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			got = append(got, rel+"->"+target)
		default:
			b, _ := os.ReadFile(p)
			got = append(got, rel+"="+string(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("unpackImage() tree =\n%v\nwant\n%v", got, want)
	}

	tree := readImageTree(t, img, "keep", "d", "c/f")
	got = nil
	for p, h := range tree.headers {
		switch h.Typeflag {
		case tar.TypeDir:
			got = append(got, p+"/")
		case tar.TypeSymlink:
			got = append(got, p+"->"+h.Linkname)
		case tar.TypeLink:
			got = append(got, p+"=k1") // a hard link to keep as layer 1 had it
		default:
			got = append(got, p+"="+map[string]string{"b/new": "n2", "q/r2": "r2"}[p]+string(tree.content[p]))
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("readImageTree() =\n%v\nwant\n%v", got, want)
	}
}
