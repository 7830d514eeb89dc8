package oci

import (
	"archive/tar"
	"os"
	"sort"
	"testing"

	"github.com/osdcloud/osd/bootstrap/images/oci/ocitest"
)

func TestImageFromFilesLayer(t *testing.T) {
	files := []File{
		{Path: "/usr/bin/tool", Mode: 0o4755, UID: 0, GID: 0, Data: []byte("#!/bin/sh\n")},
		{Path: "etc/app/app.conf", Mode: 0o640, UID: 64060, GID: 64060, Data: []byte("[DEFAULT]\n")},
		{Path: "var/lib/app", Mode: os.ModeDir | 0o750, UID: 64060, GID: 64061},
		{Path: "bin/sh", Link: "busybox"},
		{Path: "usr/bin/dns", Mode: 0o755, Data: []byte("x"), Xattrs: map[string]string{"security.capability": capNetBindService()}},
	}
	img, err := ImageFromFiles(files, ImageConfig{Entrypoint: []string{"/usr/bin/tool"}, User: "64060"})
	if err != nil {
		t.Fatalf("ImageFromFiles() = %v", err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("Layers() = %d, %v, want 1 layer", len(layers), err)
	}
	got, order := ocitest.ReadLayer(t, layers[0])
	want := map[string]ocitest.Entry{
		"bin/":             {Type: tar.TypeDir, Mode: 0o755},
		"bin/sh":           {Type: tar.TypeSymlink, Mode: 0o777, Link: "busybox"},
		"etc/":             {Type: tar.TypeDir, Mode: 0o755},
		"etc/app/":         {Type: tar.TypeDir, Mode: 0o755},
		"etc/app/app.conf": {Type: tar.TypeReg, Mode: 0o640, UID: 64060, GID: 64060, Size: 10, Data: "[DEFAULT]\n"},
		"usr/":             {Type: tar.TypeDir, Mode: 0o755},
		"usr/bin/":         {Type: tar.TypeDir, Mode: 0o755},
		"usr/bin/tool":     {Type: tar.TypeReg, Mode: 0o4755, Size: 10, Data: "#!/bin/sh\n"},
		"usr/bin/dns":      {Type: tar.TypeReg, Mode: 0o755, Size: 1, Data: "x", Xattrs: map[string]string{"security.capability": capNetBindService()}},
		"var/":             {Type: tar.TypeDir, Mode: 0o755},
		"var/lib/":         {Type: tar.TypeDir, Mode: 0o755},
		"var/lib/app/":     {Type: tar.TypeDir, Mode: 0o750, UID: 64060, GID: 64061},
	}
	if len(got) != len(want) {
		t.Errorf("layer has %d entries %v, want %d", len(got), order, len(want))
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("layer entry %s missing", name)
			continue
		}
		if g.Type != w.Type || g.Mode != w.Mode || g.UID != w.UID || g.GID != w.GID || g.Link != w.Link || g.Size != w.Size || g.Data != w.Data || !sameMap(g.Xattrs, w.Xattrs) {
			t.Errorf("layer entry %s = %+v, want %+v", name, g, w)
		}
	}
	if !sort.StringsAreSorted(order) {
		t.Errorf("layer order = %v, want sorted", order)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Architecture != "amd64" || cf.OS != "linux" || !cf.Created.Equal(Epoch) || cf.Config.User != "64060" || len(cf.Config.Entrypoint) != 1 {
		t.Errorf("ConfigFile() = %+v, want amd64/linux, epoch, user 64060, entrypoint", cf)
	}
	if len(cf.History) != 1 || !cf.History[0].Created.Equal(Epoch) {
		t.Errorf("ConfigFile().History = %+v, want one entry at epoch", cf.History)
	}
}

func TestImageFromFilesErrors(t *testing.T) {
	tests := []struct {
		name  string
		files []File
	}{
		{"duplicate", []File{{Path: "a", Mode: 0o644}, {Path: "/a", Mode: 0o644}}},
		{"empty path", []File{{Path: "/", Mode: 0o644}}},
		{"parent is a file", []File{{Path: "a", Mode: 0o644}, {Path: "a/b", Mode: 0o644}}},
		{"device", []File{{Path: "dev/x", Mode: os.ModeDevice | 0o644}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ImageFromFiles(tc.files, ImageConfig{}); err == nil {
				t.Errorf("ImageFromFiles(%v) = nil error, want an error", tc.files)
			}
		})
	}
}
