package asm

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"
)

func TestPauseBinaryELF(t *testing.T) {
	b := PauseBinary()
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("elf.NewFile(PauseBinary()) = %v, want a valid ELF", err)
	}
	defer f.Close()
	checks := []struct {
		name      string
		got, want any
	}{
		{"class", f.Class, elf.ELFCLASS64},
		{"machine", f.Machine, elf.EM_X86_64},
		{"type", f.Type, elf.ET_EXEC},
		{"progs", len(f.Progs), 1},
		{"entry", f.Entry, uint64(pauseBase + elfHdrSize + progHdrSize)},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("PauseBinary() %s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if len(f.Progs) == 1 {
		p := f.Progs[0]
		if p.Type != elf.PT_LOAD || p.Filesz != uint64(len(b)) || p.Vaddr != pauseBase || p.Flags != elf.PF_R|elf.PF_X {
			t.Errorf("PauseBinary() PT_LOAD = %+v, want whole file R+X at %#x", p.ProgHeader, pauseBase)
		}
	}
	if len(b) > 512 {
		t.Errorf("len(PauseBinary()) = %d, want <= 512", len(b))
	}
	if !bytes.Equal(b, PauseBinary()) {
		t.Errorf("PauseBinary() is not deterministic")
	}
}

func TestPauseBinaryRuns(t *testing.T) {
	if runtime.GOARCH != "amd64" || runtime.GOOS != "linux" {
		t.Skipf("the pause program is linux/amd64 code; host is %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	path := filepath.Join(t.TempDir(), "pause")
	if err := os.WriteFile(path, PauseBinary(), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(path)
			if err := cmd.Start(); err != nil {
				t.Fatalf("start pause: %v", err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			t.Cleanup(func() {
				if cmd.ProcessState == nil {
					_ = cmd.Process.Kill()
					<-done
				}
			})
			select {
			case err := <-done:
				t.Fatalf("pause exited early: %v", err)
			case <-time.After(200 * time.Millisecond):
			}
			// A child dying must not disturb it (SIGCHLD is ignored).
			if err := cmd.Process.Signal(syscall.SIGCHLD); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				t.Fatalf("pause exited on SIGCHLD: %v", err)
			case <-time.After(100 * time.Millisecond):
			}
			start := time.Now()
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("pause after %v: wait = %v, want exit status 0", sig, err)
				}
				if code := cmd.ProcessState.ExitCode(); code != 0 {
					t.Fatalf("pause after %v: exit code = %d, want 0", sig, code)
				}
				t.Logf("exited 0 %v after %v", time.Since(start), sig)
			case <-time.After(2 * time.Second):
				t.Fatalf("pause after %v: still running after 2s, want exit 0", sig)
			}
		})
	}
}
