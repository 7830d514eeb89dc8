package store

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const crashEnv = "OSD_STORE_CRASH_DB"

// TestCrashHelper is the child process of TestKilledProcessLosesNothingCommitted: it
// commits, starts a step, opens a write transaction, says READY and waits to be killed.
func TestCrashHelper(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("helper process for TestKilledProcessLosesNothingCommitted")
	}
	ctx := context.Background()
	d, err := Open(ctx, path)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(2)
	}
	if err := d.SetConfig(ctx, "committed", "yes"); err != nil {
		fmt.Println("ERR", err)
		os.Exit(2)
	}
	if _, err := d.BeginStep(ctx, "run1", "ovs"); err != nil {
		fmt.Println("ERR", err)
		os.Exit(2)
	}
	_ = d.Transaction(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for _, q := range []string{
			`INSERT INTO config VALUES ('uncommitted', 'x')`,
			`UPDATE config SET value = 'changed' WHERE key = 'committed'`,
		} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				fmt.Println("ERR", err)
				os.Exit(2)
			}
		}
		fmt.Println("READY")
		select {} // killed here, mid-transaction
	})
}

func TestKilledProcessLosesNothingCommitted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	path := filepath.Join(t.TempDir(), "osd.db")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "READY" {
		t.Fatalf("child said %q, %v, want READY", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	d, err := Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open() after kill = %v, want nil", err)
	}
	defer d.Close()
	assertOnlyCommitted(t, d)

	got, err := d.InterruptedSteps(context.Background())
	if err != nil || len(got) != 1 || got[0].Step != "ovs" || got[0].Run != "run1" {
		t.Fatalf("InterruptedSteps() = %+v, %v, want the started ovs step of run1", got, err)
	}
	id, err := d.BeginStep(context.Background(), "run2", "ovs")
	if err != nil || id <= got[0].ID {
		t.Errorf("BeginStep(run2, ovs) after crash = %d, %v, want a new entry after %d", id, err, got[0].ID)
	}
}
