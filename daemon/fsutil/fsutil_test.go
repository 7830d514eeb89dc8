package fsutil

import (
	"errors"
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
