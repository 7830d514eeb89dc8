package test

import (
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/osdcloud/osd/daemon/client"
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
	// The start followed the process it started to its end, and says how it ended.
	if !regexp.MustCompile(`exited at start \(pid [0-9]+: exit status 1\)`).MatchString(out) {
		t.Errorf("osd daemon start on a newer state says:\n%s\nwant \"exited at start (pid N: exit status 1)\"", out)
	}
}

// TestPostinstRestartsDaemon runs the .deb's postinst as dpkg runs it on an upgrade
// (configure OLD-VERSION) with `osd` being the current build linked again as a later
// version (OSD_NEXT_BIN): with no daemon running it starts none (--if-running); with one
// running it stops it keeping its workloads, backs the state database up and starts the
// new binary's daemon, which answers with the new version. (The "package upgrade" group of
// the end-to-end test does the same under a deployed cloud's workloads.)
func TestPostinstRestartsDaemon(t *testing.T) {
	requireRoot(t)
	hostToItself(t) // the restarted daemon listens on the default HTTPS port
	deb := artifact(t, "OSD_DEB", "deb", "deb")
	next, nextVersion := nextBin(t)
	old := debField(t, deb, "Version")
	n := newNode(t)

	out, err := postinstUpgrade(t, deb, next, old, n.stateDir, n.runDir)
	if err != nil {
		t.Fatalf("postinst configure %s with no daemon running: %v\n%s", old, err, out)
	}
	if _, held := client.LockHolder(n.stateDir); held || strings.Contains(out, "the osd daemon is running") {
		t.Fatalf("postinst started a daemon that was not running before:\n%s", out)
	}

	n.start()
	waitAPI(t, n, time.Minute)
	before, err := n.info()
	if err != nil {
		t.Fatal(err)
	}
	out, err = postinstUpgrade(t, deb, next, old, n.stateDir, n.runDir)
	if err != nil {
		t.Fatalf("postinst configure %s: %v\n%s\n%s", old, err, out, daemonLogTail(n))
	}
	select {
	case <-n.exited:
		if code := n.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("the old daemon exited with %d, want 0", code)
		}
	case <-time.After(time.Minute):
		t.Fatalf("the old daemon still runs after the postinst restarted it:\n%s", out)
	}
	n.cmd = nil // the new daemon is detached: the cleanup's osd reset stops it
	checkUpgradeOutput(t, out, n.stateDir, nextVersion)
	after, err := n.info()
	if err != nil || after.Version != nextVersion {
		t.Errorf("GET /1.0 after the upgrade = version %q (%v), want %q (before: %q)", after.Version, err, nextVersion, before.Version)
	}
	if pid, held := client.LockHolder(n.stateDir); !held {
		t.Errorf("no daemon holds the state dir after the upgrade")
	} else if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); exe != next {
		t.Errorf("the daemon after the upgrade runs %s, want %s", exe, next)
	}
	if _, err := os.Stat(client.KeepWorkloadsFile(n.runDir)); err == nil {
		t.Errorf("the keep-workloads request is still there: the old daemon did not read it")
	}
}

// waitAPI waits until the node's daemon answers GET /1.0.
func waitAPI(t testing.TB, n *node, timeout time.Duration) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, err = n.info(); err == nil {
			return
		}
	}
	t.Fatalf("the daemon's API did not answer in %s: %v\n%s", timeout, err, tail(n.log.String(), 30))
}
