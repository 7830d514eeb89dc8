package guest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestELFClosureHostBinary resolves a binary of this host (a Debian system, /lib a link
// to usr/lib or not) from "/": the loader and libc come with it, each once.
func TestELFClosureHostBinary(t *testing.T) {
	if _, err := os.Stat("/usr/bin/ls"); err != nil {
		t.Skip("no /usr/bin/ls on this host")
	}
	files, err := ELFClosure("/", []string{"usr/bin/ls"})
	if err != nil {
		t.Fatalf("ELFClosure(/, usr/bin/ls): %v", err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		if seen[f.Path] {
			t.Errorf("ELFClosure lists %s twice", f.Path)
		}
		seen[f.Path] = true
		if len(f.Data) < 4 || string(f.Data[:4]) != "\x7fELF" {
			t.Errorf("ELFClosure file %s is not an ELF file", f.Path)
		}
	}
	for _, want := range []string{"usr/bin/ls", "lib64/ld-linux-x86-64.so.2", "lib/x86_64-linux-gnu/libc.so.6"} {
		if !seen[want] {
			t.Errorf("ELFClosure(/, usr/bin/ls) = %v, want %s among them", paths(files), want)
		}
	}
}

func TestResolveInRoot(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"usr/lib/x86_64-linux-gnu", "etc"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	os.WriteFile(filepath.Join(root, "usr/lib/x86_64-linux-gnu/libz.so.1.2.13"), []byte("z"), 0o644)
	os.Symlink("usr/lib", filepath.Join(root, "lib"))                                                  // merged /usr
	os.Symlink("libz.so.1.2.13", filepath.Join(root, "usr/lib/x86_64-linux-gnu/libz.so.1"))            // relative
	os.Symlink("/lib/x86_64-linux-gnu/libz.so.1", filepath.Join(root, "etc/abs"))                      // absolute: inside root
	os.Symlink("../../../../../../etc/passwd", filepath.Join(root, "usr/lib/x86_64-linux-gnu/escape")) // cannot leave root
	os.Symlink("loop", filepath.Join(root, "etc/loop"))
	for _, tc := range []struct{ in, want, err string }{
		{"lib/x86_64-linux-gnu/libz.so.1", "usr/lib/x86_64-linux-gnu/libz.so.1.2.13", ""},
		{"etc/abs", "usr/lib/x86_64-linux-gnu/libz.so.1.2.13", ""},
		{"usr/lib/x86_64-linux-gnu/escape", "", "no such file"},
		{"etc/loop", "", "too many symbolic links"},
		{"lib/nothing", "", "no such file"},
	} {
		got, err := resolveInRoot(root, tc.in)
		if got != tc.want || (tc.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("resolveInRoot(%s) = %q, %v, want %q, %q", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// TestInitrdEntriesDirsFirst: every member's directory comes before it in the archive
// (the kernel's unpacker makes no missing parents).
func TestInitrdEntriesDirsFirst(t *testing.T) {
	files := []File{{Path: "usr/sbin/dropbear", Data: []byte("x"), Mode: 0o755}, {Path: "lib64/ld-linux-x86-64.so.2", Data: []byte("y"), Mode: 0o755}}
	made := map[string]bool{"": true}
	for _, e := range initrdEntries([]byte("busybox"), files, []Module{{Name: "virtio_net", Data: []byte("m")}}) {
		if dir := filepath.Dir(e.Name); !made[strings.TrimPrefix(dir, ".")] {
			t.Errorf("initrd member %s comes before its directory %s", e.Name, dir)
		}
		if made[e.Name] {
			t.Errorf("initrd member %s twice", e.Name)
		}
		if e.Name == "bin/busybox" && e.Mode&0o7777 != 0o4755 {
			t.Errorf("initrd member bin/busybox mode %o, want 4755 (set-user-ID root: the login user's ping needs a raw socket)", e.Mode&0o7777)
		}
		made[e.Name] = true
	}
	for _, want := range []string{"init", "bin/osd-sshd", "bin/osd-configdrive", "etc/shells", "usr/sbin/dropbear", "lib/modules/virtio_net.ko"} {
		if !made[want] {
			t.Errorf("initrd lacks %s", want)
		}
	}
}

func paths(fs []File) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Path)
	}
	return out
}
