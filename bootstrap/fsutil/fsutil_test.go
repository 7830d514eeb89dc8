package fsutil

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sub", "f")
	for _, content := range []string{"one", "two"} {
		if err := WriteFileAtomic(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != content {
			t.Fatalf("WriteFileAtomic then read = %q, %v, want %q", got, err, content)
		}
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode = %o, want 600", st.Mode().Perm())
	}
	ents, _ := os.ReadDir(filepath.Dir(p))
	if len(ents) != 1 {
		t.Errorf("directory holds %d entries, want only the file (no temporary left)", len(ents))
	}
}

// TestLockAcrossProcesses holds the lock in this process and checks that another process
// (flock is per open file, so a child is the honest test) cannot take it and sees our PID.
func TestLockAcrossProcesses(t *testing.T) {
	if os.Getenv("FSUTIL_LOCK_CHILD") != "" {
		_, holder, err := Lock(os.Getenv("FSUTIL_LOCK_CHILD"))
		if !errors.Is(err, ErrLocked) {
			os.Exit(3)
		}
		os.Exit(10 + holder%100)
	}
	p := filepath.Join(t.TempDir(), "lock")
	unlock, _, err := Lock(p)
	if err != nil {
		t.Fatal(err)
	}
	if pid, held := Holder(p); !held || pid != os.Getpid() {
		t.Errorf("Holder() = %d, %v, want %d, true", pid, held, os.Getpid())
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestLockAcrossProcesses$")
	cmd.Env = append(os.Environ(), "FSUTIL_LOCK_CHILD="+p)
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 10+os.Getpid()%100 {
		t.Errorf("child Lock() exit = %v, want %d (locked, holder %s)", err, 10+os.Getpid()%100, strconv.Itoa(os.Getpid()))
	}
	unlock()
	if _, held := Holder(p); held {
		t.Errorf("Holder() after unlock = held, want free")
	}
}

func TestWriteAtomicNewRefusesExisting(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	write := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	if err := WriteAtomicNew(p, 0o644, write("one")); err != nil {
		t.Fatal(err)
	}
	if err := WriteAtomicNew(p, 0o644, write("two")); !errors.Is(err, fs.ErrExist) {
		t.Errorf("WriteAtomicNew over an existing file = %v, want fs.ErrExist", err)
	}
	if err := WriteAtomic(p, 0o644, func(io.Writer) error { return errors.New("boom") }); err == nil {
		t.Errorf("WriteAtomic with a failing write = nil, want the error")
	}
	got, _ := os.ReadFile(p)
	ents, _ := os.ReadDir(filepath.Dir(p))
	if string(got) != "one" || len(ents) != 1 {
		t.Errorf("after refused and failed writes: content %q, %d entries; want \"one\", 1 (no temporary left)", got, len(ents))
	}
	src := filepath.Join(filepath.Dir(p), "src")
	os.WriteFile(src, []byte("moved"), 0o644)
	if err := RenameDurable(src, p); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); string(got) != "moved" {
		t.Errorf("RenameDurable then read = %q, want moved", got)
	}
}

func TestCopyFile(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := CopyFile(src, dst, 0o600); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("CopyFile of a missing file = %v, want fs.ErrNotExist", err)
	}
	if _, err := os.Lstat(dst); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("CopyFile of a missing file left %s: %v", dst, err)
	}
	os.WriteFile(src, []byte("state"), 0o644)
	os.WriteFile(dst, []byte("old"), 0o644)
	if err := CopyFile(src, dst, 0o600); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(dst)
	st, _ := os.Stat(dst)
	ents, _ := os.ReadDir(dir)
	if string(got) != "state" || st.Mode().Perm() != 0o600 || len(ents) != 2 {
		t.Errorf("after CopyFile: %q, mode %o, %d entries; want \"state\", 600, 2 (no temporary left)", got, st.Mode().Perm(), len(ents))
	}
}

func TestSymlink(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "kubectl")
	for _, c := range []struct {
		name   string
		before func()
		target string
	}{
		{"new link", func() {}, "/usr/bin/osd"},
		{"over a link elsewhere", func() {}, "/opt/osd"},
		{"over a regular file", func() { os.Remove(p); os.WriteFile(p, []byte("x"), 0o755) }, "/usr/bin/osd"},
	} {
		c.before()
		if err := Symlink(c.target, p); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got, err := os.Readlink(p); err != nil || got != c.target {
			t.Errorf("%s: Readlink = %q, %v, want %q", c.name, got, err, c.target)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Errorf("%s: directory holds %d entries, want only the link", c.name, len(ents))
		}
	}
	if err := Symlink("/x", filepath.Join(dir, "missing", "link")); err == nil {
		t.Errorf("Symlink into a missing directory = nil, want an error")
	}
}
