package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The process a start launched is followed until it ends however long it takes to load,
// and how it ended is reported (what ensureDaemon tells a daemon that exited at start by).
func TestStartDetachedReportsTheEnd(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "daemon.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	ended, err := startDetached(logf, "sh", "-c", "echo starting; sleep 1; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	if why := ended(); why != nil {
		t.Fatalf("ended() right after the start = %v, want nil while it runs", why)
	}
	var why error
	for deadline := time.Now().Add(10 * time.Second); why == nil && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		why = ended()
	}
	if why == nil || !strings.Contains(why.Error(), "exit status 3") || !strings.HasPrefix(why.Error(), "pid ") {
		t.Fatalf("ended() after the process exited = %v, want its pid and \"exit status 3\"", why)
	}
	if again := ended(); again == nil || again.Error() != why.Error() {
		t.Errorf("ended() asked again = %v, want %v", again, why)
	}
	if b, _ := os.ReadFile(logPath); string(b) != "starting\n" {
		t.Errorf("the log holds %q, want the process's output", b)
	}

	ok, err := startDetached(logf, "true")
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ok() == nil && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
	}
	if why := ok(); why == nil || !strings.Contains(why.Error(), "exit status 0") {
		t.Errorf("a process that exited 0 before its API answered: ended() = %v, want \"exit status 0\"", why)
	}
}

// A stopped daemon counts as ended once its process is gone or a zombie, not when it
// released its lock (it stops the embedded Kubernetes after that).
func TestProcessEnded(t *testing.T) {
	if processEnded(os.Getpid()) {
		t.Fatal("processEnded(own pid) = true")
	}
	// A lock file that names no process: nothing to wait for (kill(0, 0) would answer for
	// this process's own group).
	if !processEnded(0) {
		t.Error("processEnded(0) = false")
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if processEnded(pid) {
		t.Fatalf("processEnded(%d) of a running sleep = true", pid)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	zombie := false
	for deadline := time.Now().Add(10 * time.Second); !zombie && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		zombie = processEnded(pid)
	}
	if !zombie {
		t.Errorf("processEnded(%d) of a killed, not yet reaped process = false", pid)
	}
	cmd.Wait()
	if !processEnded(pid) {
		t.Errorf("processEnded(%d) of a reaped process = false", pid)
	}
}
