package asm

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAsRootBinary installs the program set-user-ID root and runs it as an unprivileged
// user: the command it executes has every ID root; without an argument it exits 127.
func TestAsRootBinary(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (a set-user-ID root file)")
	}
	dir, err := os.MkdirTemp("", "osd-asroot-") // nobody must reach it: not under t.TempDir's 0700
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := filepath.Join(dir, "asroot")
	if err := os.WriteFile(p, AsRootBinary(), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(p), 0o755)
	if err := os.Chmod(p, os.ModeSetuid|0o755); err != nil {
		t.Fatal(err)
	}
	// As a login shell runs it: a plain exec by an unprivileged user (chroot --userspec
	// drops to nobody and executes the file).
	run := func(args ...string) (string, error) {
		out, err := exec.Command("chroot", append([]string{"--userspec=65534:65534", "/", p}, args...)...).CombinedOutput()
		return string(out), err
	}
	out, err := run("/bin/sh", "-c", "echo $(id -ru) $(id -u) $(id -rg) $(id -g) $(id -G)")
	if err != nil || strings.TrimSpace(out) != "0 0 0 0 0" {
		t.Errorf("asroot sh -c 'id ...' as nobody = %q, %v; want every ID 0", out, err)
	}
	var ee *exec.ExitError
	if _, err := run(); !errors.As(err, &ee) || ee.ExitCode() != 127 {
		t.Errorf("asroot without a command = %v, want exit status 127", err)
	}
}
