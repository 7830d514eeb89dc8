package bundle

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/osdcloud/osd/bootstrap/images"
)

// bundleEntry is one entry of a bundle as the crafted-bundle tests edit it.
type bundleEntry struct {
	hdr  tar.Header
	data []byte
}

// readEntries splits a bundle into its entries.
func readEntries(t testing.TB, data []byte) []bundleEntry {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(data))
	var out []bundleEntry
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, bundleEntry{hdr: *h, data: b})
	}
}

// writeEntries writes entries as a tar; a regular file's size is its data's.
func writeEntries(t testing.TB, entries []bundleEntry) []byte {
	t.Helper()
	b, err := buildTar(entries)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func buildTar(entries []bundleEntry) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := e.hdr
		h.Format = tar.FormatPAX
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.data))
		} else {
			h.Size = 0
		}
		if err := tw.WriteHeader(&h); err != nil {
			return nil, fmt.Errorf("write header %q: %w", h.Name, err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// craftKit holds a valid bundle's entries and helpers to edit them.
type craftKit struct {
	t       testing.TB
	entries []bundleEntry
	m       Manifest
}

func newCraftKit(t testing.TB, data []byte) *craftKit {
	k := &craftKit{t: t, entries: readEntries(t, data)}
	if err := json.Unmarshal(k.entries[0].data, &k.m); err != nil {
		t.Fatal(err)
	}
	return k
}

// edit returns the bundle after editing a copy of its manifest and entries.
func (k *craftKit) edit(fn func(m *Manifest, es []bundleEntry) []bundleEntry) []byte {
	k.t.Helper()
	b, err := k.tryEdit(fn)
	if err != nil {
		k.t.Fatal(err)
	}
	return b
}

// tryEdit is edit returning archive/tar's refusal to write an entry.
func (k *craftKit) tryEdit(fn func(m *Manifest, es []bundleEntry) []bundleEntry) ([]byte, error) {
	var m Manifest
	b, _ := json.Marshal(k.m)
	json.Unmarshal(b, &m)
	es := make([]bundleEntry, len(k.entries))
	for i, e := range k.entries {
		es[i] = bundleEntry{hdr: e.hdr, data: append([]byte(nil), e.data...)}
	}
	es = fn(&m, es)
	// Unless the edit replaced bundle.json itself, it gets the edited manifest.
	if len(es) > 0 && es[0].hdr.Name == bundleManifestName && bytes.Equal(es[0].data, k.entries[0].data) {
		if b, err := json.Marshal(m); err == nil {
			es[0].data = b
		}
	}
	return buildTar(es)
}

// blobIndex is the position of the first blob entry.
func blobIndex(es []bundleEntry) int {
	for i, e := range es {
		if strings.HasPrefix(e.hdr.Name, bundleBlobPrefix) {
			return i
		}
	}
	return -1
}

func reg(name string, data []byte) bundleEntry {
	return bundleEntry{hdr: tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}, data: data}
}

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// treeOf lists every path under dir (relative, with type and size), skipping skip.
func treeOf(t testing.TB, dir, skip string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if p == skip {
			return filepath.SkipDir
		}
		fi, _ := d.Info()
		rel, _ := filepath.Rel(dir, p)
		out = append(out, fmt.Sprintf("%s %s %d", rel, fi.Mode(), fi.Size()))
		return nil
	})
	sort.Strings(out)
	return out
}

// TestImportBundleRefusesCrafted imports crafted bundles (escaping names and digests,
// links, devices, duplicates, lying sizes, unlisted blobs...) into a store that has a
// sentinel directory tree next to it, which every escaping name points into. Each must be
// refused with ErrBad and a message saying what is wrong, leave the sentinel tree
// and the store as they were, and leave no staging directory.
func TestImportBundleRefusesCrafted(t *testing.T) {
	src := smallStore(t)
	var good bytes.Buffer
	if _, err := Export(&good, src); err != nil {
		t.Fatal(err)
	}
	k := newCraftKit(t, good.Bytes())
	base := t.TempDir()
	sentinel := filepath.Join(base, "sentinel")
	for _, d := range []string{"etc/cron.d", "bin"} {
		if err := os.MkdirAll(filepath.Join(sentinel, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(sentinel, "etc/passwd"), []byte("root:x:0:0::/root:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	storeDir := filepath.Join(base, "state", "images")
	// From the stage (storeDir/.import-X) and from the old code's stage/blobs/sha256, so
	// many ".." reach base whatever the nesting; extra ".." stop at / and miss.
	up := strings.Repeat("../", 5)
	escape := up + "sentinel/etc/cron.d/x"
	absEscape := filepath.Join(sentinel, "etc/cron.d/abs")
	evil := []byte("* * * * * root sh -c 'echo owned'\n")
	evilDigest := digestOf(evil)
	evilHex := strings.TrimPrefix(evilDigest, "sha256:")
	listEvil := func(m *Manifest, digest string) {
		m.Blobs = append(m.Blobs, Blob{Digest: digest, Size: int64(len(evil))})
	}
	insertAt := func(es []bundleEntry, i int, e bundleEntry) []bundleEntry {
		return append(es[:i], append([]bundleEntry{e}, es[i:]...)...)
	}
	special := func(name string, typ byte, link string) func(m *Manifest, es []bundleEntry) []bundleEntry {
		return func(m *Manifest, es []bundleEntry) []bundleEntry {
			listEvil(m, evilDigest)
			h := tar.Header{Name: name, Typeflag: typ, Linkname: link, Mode: 0o644, Devmajor: 1, Devminor: 3, ModTime: time.Unix(0, 0)}
			return insertAt(es, blobIndex(es), bundleEntry{hdr: h})
		}
	}
	firstBlob := k.m.Blobs[0]
	firstHex := strings.TrimPrefix(firstBlob.Digest, "sha256:")

	tests := []struct {
		name string
		edit func(m *Manifest, es []bundleEntry) []bundleEntry
		want string // in the error
	}{
		{"blob name with .. (listed digest too)", func(m *Manifest, es []bundleEntry) []bundleEntry {
			listEvil(m, "sha256:"+escape)
			return insertAt(es, blobIndex(es), reg(bundleBlobPrefix+escape, evil))
		}, "is not sha256: followed by 64 lowercase hex digits"},
		{"blob name with .. (not listed)", func(m *Manifest, es []bundleEntry) []bundleEntry {
			return insertAt(es, blobIndex(es), reg(bundleBlobPrefix+escape, evil))
		}, "is not part of a bundle"},
		{"absolute name", func(m *Manifest, es []bundleEntry) []bundleEntry {
			return insertAt(es, blobIndex(es), reg(absEscape, evil))
		}, "is not part of a bundle"},
		{"absolute blob name", func(m *Manifest, es []bundleEntry) []bundleEntry {
			listEvil(m, evilDigest)
			return insertAt(es, blobIndex(es), reg("/"+bundleBlobPrefix+evilHex, evil))
		}, "is not part of a bundle"},
		{"name starting with ./", func(m *Manifest, es []bundleEntry) []bundleEntry {
			listEvil(m, evilDigest)
			return insertAt(es, blobIndex(es), reg("./"+bundleBlobPrefix+evilHex, evil))
		}, "is not part of a bundle"},
		{"parent directory name", func(m *Manifest, es []bundleEntry) []bundleEntry {
			return insertAt(es, blobIndex(es), reg("../x", evil))
		}, "is not part of a bundle"},
		{"unknown entry", func(m *Manifest, es []bundleEntry) []bundleEntry {
			return append(es, reg("README", []byte("hi")))
		}, `entry "README" is not part of a bundle`},
		{"symlink as a blob", special(bundleBlobPrefix+evilHex, tar.TypeSymlink, "/etc/passwd"), "is a symbolic link"},
		{"symlink out of the stage", special(bundleBlobPrefix+evilHex, tar.TypeSymlink, up+"sentinel/etc/passwd"), "is a symbolic link"},
		{"hard link as a blob", special(bundleBlobPrefix+evilHex, tar.TypeLink, bundleBlobPrefix+firstHex), "is a hard link"},
		{"character device", special(bundleBlobPrefix+evilHex, tar.TypeChar, ""), "is a character device"},
		{"block device", special(bundleBlobPrefix+evilHex, tar.TypeBlock, ""), "is a block device"},
		{"fifo", special(bundleBlobPrefix+evilHex, tar.TypeFifo, ""), "is a fifo"},
		{"directory", special("blobs/", tar.TypeDir, ""), "is not part of a bundle"},
		{"directory named like a blob", special(bundleBlobPrefix+evilHex, tar.TypeDir, ""), "is a directory"},
		{"duplicate blob", func(m *Manifest, es []bundleEntry) []bundleEntry {
			i := blobIndex(es)
			return insertAt(es, i+1, es[i])
		}, "appears twice"},
		{"duplicate index.json", func(m *Manifest, es []bundleEntry) []bundleEntry {
			return append(es, es[len(es)-1])
		}, `entry "index.json" appears twice`},
		{"second bundle.json", func(m *Manifest, es []bundleEntry) []bundleEntry {
			return append(es, es[0])
		}, `entry "bundle.json" appears twice`},
		{"blob larger than listed", func(m *Manifest, es []bundleEntry) []bundleEntry {
			i := blobIndex(es)
			es[i].data = append(es[i].data, make([]byte, 4096)...)
			return es
		}, "bytes in the archive, bundle.json lists"},
		{"blob smaller than listed", func(m *Manifest, es []bundleEntry) []bundleEntry {
			i := blobIndex(es)
			es[i].data = es[i].data[:len(es[i].data)-1]
			return es
		}, "bytes in the archive, bundle.json lists"},
		{"blob whose content is not its digest", func(m *Manifest, es []bundleEntry) []bundleEntry {
			listEvil(m, evilDigest)
			other := append([]byte(nil), evil...)
			other[0] = '#'
			return insertAt(es, blobIndex(es), reg(bundleBlobPrefix+evilHex, other))
		}, fmt.Sprintf("want %d bytes with the digest of its name", len(evil))},
		{"blob not listed", func(m *Manifest, es []bundleEntry) []bundleEntry {
			return insertAt(es, blobIndex(es), reg(bundleBlobPrefix+evilHex, evil))
		}, "is not listed in bundle.json"},
		{"listed blob missing", func(m *Manifest, es []bundleEntry) []bundleEntry {
			listEvil(m, evilDigest)
			return es
		}, fmt.Sprintf("(%d bytes) is missing", len(evil))},
		{"blob listed twice", func(m *Manifest, es []bundleEntry) []bundleEntry {
			m.Blobs = append(m.Blobs, m.Blobs[0])
			return es
		}, "is listed twice"},
		{"uppercase digest", func(m *Manifest, es []bundleEntry) []bundleEntry {
			m.Blobs[0].Digest = strings.ToUpper(m.Blobs[0].Digest)
			return es
		}, "is not sha256: followed by 64 lowercase hex digits"},
		{"other digest algorithm", func(m *Manifest, es []bundleEntry) []bundleEntry {
			m.Blobs[0].Digest = "sha512:" + firstHex
			return es
		}, "is not sha256: followed by 64 lowercase hex digits"},
		{"negative size", func(m *Manifest, es []bundleEntry) []bundleEntry {
			m.Blobs[0].Size = -1
			return es
		}, "is negative or takes the bundle over"},
		{"total over the cap", func(m *Manifest, es []bundleEntry) []bundleEntry {
			m.Blobs[0].Size = maxBundleTotal
			return es
		}, "is negative or takes the bundle over"},
		{"image name with a path", func(m *Manifest, es []bundleEntry) []bundleEntry {
			m.Images[0].Name = "../../etc"
			return es
		}, `image name "../../etc" is not lowercase letters`},
		{"image listed twice", func(m *Manifest, es []bundleEntry) []bundleEntry {
			m.Images = append(m.Images, m.Images[0])
			return es
		}, "is listed twice"},
		{"image digest with ..", func(m *Manifest, es []bundleEntry) []bundleEntry {
			m.Images[0].Digest = "sha256:" + escape
			return es
		}, "is not sha256: followed by 64 lowercase hex digits"},
		{"image manifest not listed", func(m *Manifest, es []bundleEntry) []bundleEntry {
			m.Images[0].Digest = evilDigest
			return es
		}, "is not in the blob list"},
		{"image manifest is a layer", func(m *Manifest, es []bundleEntry) []bundleEntry {
			listEvil(m, evilDigest)
			m.Images[0].Digest = evilDigest
			return insertAt(es, blobIndex(es), reg(bundleBlobPrefix+evilHex, evil))
		}, "manifest sha256:"},
		{"bad reference", func(m *Manifest, es []bundleEntry) []bundleEntry {
			m.Images[0].Ref = "Not A Reference"
			return es
		}, `reference "Not A Reference"`},
		{"control characters in the recipe hash", func(m *Manifest, es []bundleEntry) []bundleEntry {
			m.Images[0].RecipeHash = "a\nb"
			return es
		}, "holds control characters"},
		{"no images", func(m *Manifest, es []bundleEntry) []bundleEntry {
			m.Images = nil
			return es
		}, "no images listed"},
		{"other format version", func(m *Manifest, es []bundleEntry) []bundleEntry {
			m.Version = 2
			return es
		}, "format version 2, want 1"},
		{"bundle.json not first", func(m *Manifest, es []bundleEntry) []bundleEntry {
			es[0], es[1] = es[1], es[0]
			return es
		}, `first entry is "oci-layout", want bundle.json`},
		{"bundle.json is a symlink", func(m *Manifest, es []bundleEntry) []bundleEntry {
			es[0] = bundleEntry{hdr: tar.Header{Name: bundleManifestName, Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}}
			return es
		}, `entry "bundle.json" is a symbolic link`},
		{"bundle.json with trailing data", func(m *Manifest, es []bundleEntry) []bundleEntry {
			b, _ := json.Marshal(m)
			es[0].data = append(b, []byte(`{"version":1}`)...)
			return es
		}, "bundle.json: invalid character"},
		{"oci-layout missing", func(m *Manifest, es []bundleEntry) []bundleEntry {
			return append(es[:1], es[2:]...)
		}, "entry oci-layout is missing"},
		{"index.json missing", func(m *Manifest, es []bundleEntry) []bundleEntry {
			return es[:len(es)-1]
		}, "entry index.json is missing"},
		{"index.json over its cap", func(m *Manifest, es []bundleEntry) []bundleEntry {
			es[len(es)-1].data = bytes.Repeat([]byte(" "), int(maxBundleSmallEntry)+1)
			return es
		}, `entry "index.json" is 4194305 bytes, more than 4194304`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(base, "crafted.bundle")
			if err := os.WriteFile(path, k.edit(tc.edit), 0o644); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(path)
			store, err := images.OpenStore(storeDir)
			if err != nil {
				t.Fatal(err)
			}
			before := treeOf(t, base, storeDir)
			storeBefore := treeOf(t, storeDir, "")
			got, err := Import(path, store)
			if err == nil {
				t.Fatalf("Import(%s) = %d images, nil error; want it refused", tc.name, len(got))
			}
			if !errors.Is(err, ErrBad) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "nothing was imported") {
				t.Errorf("Import(%s) = %q, want ErrBad saying %q and nothing was imported", tc.name, err, tc.want)
			}
			if after := treeOf(t, base, storeDir); strings.Join(after, "\n") != strings.Join(before, "\n") {
				t.Errorf("Import(%s) changed files outside the store:\nbefore %v\nafter  %v", tc.name, before, after)
			}
			if after := treeOf(t, storeDir, ""); strings.Join(after, "\n") != strings.Join(storeBefore, "\n") {
				t.Errorf("Import(%s) left files in the store:\nbefore %v\nafter  %v", tc.name, storeBefore, after)
			}
		})
	}
	// The untouched bundle still imports into the same store.
	path := filepath.Join(base, "good.bundle")
	if err := os.WriteFile(path, k.edit(func(_ *Manifest, es []bundleEntry) []bundleEntry { return es }), 0o644); err != nil {
		t.Fatal(err)
	}
	store, _ := images.OpenStore(storeDir)
	if got, err := Import(path, store); err != nil || len(got) != 3 {
		t.Fatalf("Import(re-written good bundle) = %d images, %v; want 3", len(got), err)
	}
}

// TestImportBundleRefusesNonRegularFiles: a fifo, a directory and a device are refused
// at once (a fifo would block the import forever).
func TestImportBundleRefusesNonRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := images.OpenStore(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, dir, "/dev/zero"} {
		done := make(chan error, 1)
		go func() { _, err := Import(p, store); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrBad) || !strings.Contains(err.Error(), "is not a regular file") {
				t.Errorf("Import(%s) = %v, want ErrBad saying it is not a regular file", p, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Import(%s) still running after 10s", p)
		}
	}
}

// TestStageStaysInside calls the stage directly with names no check would let through:
// the os.Root it writes through refuses each (the second line of defence), and nothing
// appears outside the stage.
func TestStageStaysInside(t *testing.T) {
	base := t.TempDir()
	if err := os.Symlink("/", filepath.Join(base, "rootlink")); err != nil {
		t.Fatal(err)
	}
	stg, err := newStage(base)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..", filepath.Join(stg.dir, "up")); err != nil {
		t.Fatal(err)
	}
	before := treeOf(t, base, stg.dir)
	for _, name := range []string{"../escape", "up/escape", "../rootlink/tmp/escape", "/tmp/escape-abs"} {
		if err := stg.writeBlob(strings.NewReader("x"), name, 1); err == nil {
			t.Errorf("writeBlob(%q) = nil error, want the stage's root to refuse it", name)
		}
	}
	if after := treeOf(t, base, stg.dir); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Errorf("writeBlob with escaping names changed files outside the stage:\nbefore %v\nafter  %v", before, after)
	}
	os.Remove(filepath.Join(stg.dir, "up"))
	if err := stg.remove(); err != nil {
		t.Errorf("remove() = %v", err)
	}
	if _, err := os.Stat(stg.dir); !os.IsNotExist(err) {
		t.Errorf("stage %s still exists after remove (%v)", stg.dir, err)
	}
}
