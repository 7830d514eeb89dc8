package test

import (
	"database/sql"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"
)

// TestDaemonNotifiesServiceManager runs the real daemon as systemd runs osd.service
// (Type=notify, WatchdogSec=): NOTIFY_SOCKET names a datagram socket this test reads in
// systemd's place. The daemon must say READY=1 only once its API answers, ping the
// watchdog, and say STOPPING=1 when it stops.
func TestDaemonNotifiesServiceManager(t *testing.T) {
	requireRoot(t)
	n := newNode(t)
	sock := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	cmd := exec.Command(n.bin, append(n.globalArgs(), "daemon", "--https-address", "none")...)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock, "WATCHDOG_USEC=2000000") // pings every 0.5 s
	cmd.Stdout, cmd.Stderr = n.log, n.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.cmd, n.exited = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(n.exited) }()

	read := func(timeout time.Duration) string {
		conn.SetReadDeadline(time.Now().Add(timeout))
		buf := make([]byte, 4096)
		k, err := conn.Read(buf)
		if err != nil {
			return ""
		}
		return string(buf[:k])
	}
	msg := read(60 * time.Second)
	if !strings.HasPrefix(msg, "READY=1") {
		t.Fatalf("first notification = %q, want READY=1 (daemon output:\n%s)", msg, tail(n.log.String(), 30))
	}
	if _, err := n.info(); err != nil {
		t.Errorf("READY=1 sent, but GET /1.0 fails: %v", err)
	}
	t.Logf("READY=1 %s after the start", time.Since(start).Round(time.Millisecond))
	pings := 0
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		switch m := read(time.Until(deadline)); m {
		case "WATCHDOG=1":
			pings++
		case "":
		default:
			t.Errorf("unexpected notification %q while running", m)
		}
	}
	if pings < 3 {
		t.Errorf("%d watchdog pings in 3 s with WATCHDOG_USEC=2000000, want at least 3 (one every 0.5 s)", pings)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	got := ""
	for m := read(30 * time.Second); m != ""; m = read(30 * time.Second) {
		if got = m; m == "STOPPING=1" {
			break
		}
	}
	if got != "STOPPING=1" {
		t.Errorf("after SIGTERM the last notification = %q, want STOPPING=1", got)
	}
	if code, ok := n.stop(2 * time.Minute); !ok || code != 0 {
		t.Errorf("daemon exit = %d (in time: %v), want 0", code, ok)
	}
}

// TestDaemonRefusesNewerState starts the daemon on a state database written by a newer
// osd (a schema version this one does not know), as after a downgrade: it must not start,
// and osd daemon start (what the packages' scripts run) must say why.
func TestDaemonRefusesNewerState(t *testing.T) {
	requireRoot(t)
	n := newNode(t)
	// Runs before newNode's cleanup: osd reset cannot read this database either.
	t.Cleanup(func() { os.Remove(filepath.Join(n.stateDir, "osd.db")) })
	if err := os.MkdirAll(n.stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", filepath.Join(n.stateDir, "osd.db"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec(`CREATE TABLE schema (version INTEGER PRIMARY KEY, updated_at INTEGER NOT NULL);
		INSERT INTO schema(version, updated_at) VALUES (999, 0)`)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	out, err := n.osd("daemon", "start", "--timeout", "1m")
	if err == nil {
		t.Fatalf("osd daemon start on a newer state = nil error, want a refusal:\n%s", out)
	}
	if !strings.Contains(out, "database schema version 999 is newer than this osd supports") {
		t.Errorf("osd daemon start on a newer state says:\n%s\nwant the daemon's reason (schema 999 newer than this osd supports)", out)
	}
}
