package test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/api"
)

func init() { registerE2E("package upgrade", stageDestructive, checkPackageUpgrade) }

// checkPackageUpgrade does to the shared cloud what installing a newer .deb does to a
// running one: the package's postinst runs as dpkg runs it on an upgrade, with `osd` being
// the current build linked again as a later version (OSD_NEXT_BIN). The old daemon stops
// keeping its workloads, the state database is backed up, the new daemon starts and
// converges: a server booted before keeps its QEMU process and stays ACTIVE, every pod's
// shim is the same process, no Helm release gets a new revision (the values are the same),
// osd status shows the new version and Keystone issues a token. The new daemon runs
// detached, as after a real upgrade, until the teardown's osd reset stops it. What dpkg
// itself does (unpacking, refusing a downgrade, the unit) is checked in a clean root by
// TestDebInCleanDebian; the upgrade from the previous commit's package by TestPackageUpgrade.
func checkPackageUpgrade(t *testing.T, n *node) {
	deb := artifact(t, "OSD_DEB", "deb", "deb")
	next, nextVersion := nextBin(t)
	id := n.bootServer(t, "upgrade-server")
	qemu := qemuPID(t, n, id)
	before := status(t, n)
	if before.Version == nextVersion {
		t.Fatalf("the cloud runs %s already: OSD_NEXT_BIN must be a later build", nextVersion)
	}
	shims := processesMatching("containerd-shim-runc-v2")
	if len(shims) == 0 {
		t.Fatal("no pod shim (containerd-shim-runc-v2) runs before the upgrade")
	}

	t0 := time.Now()
	out, err := postinstUpgrade(t, deb, next, debField(t, deb, "Version"), n.stateDir, n.runDir)
	if err != nil {
		// What the postinst said last comes first: CI shows a failure's first lines.
		t.Fatalf("postinst configure (the upgrade): %v: %s\n%s\n%s", err, strings.ReplaceAll(tail(strings.TrimSpace(out), 2), "\n", " | "), out, daemonLogTail(n))
	}
	t.Logf("postinst restarted the daemon in %s:\n%s", time.Since(t0).Round(time.Second), out)
	if n.cmd != nil {
		select {
		case <-n.exited:
			if code := n.cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("the old daemon exited with %d, want 0", code)
			}
		case <-time.After(time.Minute):
			t.Errorf("the old daemon (pid %d) still runs after the postinst restarted it", n.cmd.Process.Pid)
		}
		n.cmd = nil // the new daemon is detached: osd reset stops it at the teardown
	}
	checkUpgradeOutput(t, out, n.stateDir, nextVersion)
	after := waitConverged(t, n, t0, 20*time.Minute)
	t.Logf("upgraded from %s to %s; converged %s after the postinst started", before.Version, after.Version, time.Since(t0).Round(time.Second))
	if after.Version != nextVersion || after.PID == before.PID {
		t.Errorf("osd status after the upgrade: version %q, daemon pid %d, want version %q and a new daemon (the old one was pid %d)", after.Version, after.PID, nextVersion, before.PID)
	}

	if pid := qemuPID(t, n, id); pid != qemu {
		t.Errorf("server's QEMU process after the upgrade = %d, want %d (the guest must keep running)", pid, qemu)
	}
	if st := n.field(t, "server", "show", id, "-f", "value", "-c", "status"); st != "ACTIVE" {
		t.Errorf("server status after the upgrade = %s, want ACTIVE", st)
	}
	if changed := changedReleases(before.Deployment, after.Deployment); len(changed) > 0 {
		t.Errorf("releases upgraded although their values did not change: %v", changed)
	}
	if gone := exited(shims); len(gone) > 0 {
		t.Errorf("%d of the %d pod shims running before the upgrade are gone (their pods were restarted): %v", len(gone), len(shims), gone)
	}
	if out, err := n.openstack("token", "issue", "-f", "value", "-c", "id"); err != nil || strings.TrimSpace(out) == "" {
		t.Errorf("openstack token issue after the upgrade: %v\n%s", err, out)
	}
	if t.Failed() {
		t.Log(daemonLogTail(n))
	}
}

// nextBin is the current build linked again as a later version (make next builds
// bin/osd-next; make test names it in OSD_NEXT_BIN), and the version it reports.
func nextBin(t testing.TB) (string, string) {
	t.Helper()
	p := os.Getenv("OSD_NEXT_BIN")
	if p == "" {
		p = "../bin/osd-next"
		if _, err := os.Stat(p); err != nil {
			t.Skip("no bin/osd-next: run make next (or set OSD_NEXT_BIN)")
		}
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	out := strings.TrimSpace(run(t, time.Minute, nil, abs, "--version"))
	v, ok := strings.CutPrefix(out, "osd ")
	if !ok || v == "" {
		t.Fatalf("%s --version = %q, want \"osd VERSION\"", abs, out)
	}
	return abs, v
}

// postinstUpgrade runs the .deb's postinst as dpkg runs it when the package replaces an
// older one (postinst configure OLD-VERSION), for the daemon of stateDir and runDir (the
// OSD_STATE_DIR and OSD_RUN_DIR the CLI reads). `osd` on its PATH is bin; stand-ins for
// deb-systemd-helper and systemctl keep the host's systemd configuration untouched (what
// the script does to the unit is checked in the clean root by TestDebInCleanDebian).
func postinstUpgrade(t testing.TB, deb, bin, oldVersion, stateDir, runDir string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	run(t, time.Minute, nil, "dpkg-deb", "--control", deb, filepath.Join(dir, "control"))
	path := filepath.Join(dir, "bin")
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(path, "osd")); err != nil {
		t.Fatal(err)
	}
	for _, stub := range []string{"deb-systemd-helper", "systemctl"} {
		if err := os.WriteFile(filepath.Join(path, stub), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return runErr(10*time.Minute, []string{"PATH=" + path + ":" + os.Getenv("PATH"),
		"OSD_STATE_DIR=" + stateDir, "OSD_RUN_DIR=" + runDir,
		"DPKG_MAINTSCRIPT_PACKAGE=osd", "DPKG_MAINTSCRIPT_NAME=postinst"},
		"sh", filepath.Join(dir, "control", "postinst"), "configure", oldVersion)
}

// checkUpgradeOutput checks that the postinst's restart said what it did: the old daemon
// stopped keeping the workloads, the state backed up, the new daemon running.
func checkUpgradeOutput(t testing.TB, out, stateDir, version string) {
	t.Helper()
	for _, want := range []string{
		"its workloads keep running",
		"state database backed up to " + filepath.Join(stateDir, "osd.db.pre-upgrade"),
		"the osd daemon is running (version " + version + ")",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the upgrade's postinst did not say %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(stateDir, "osd.db.pre-upgrade")); err != nil {
		t.Errorf("no state backup: %v", err)
	}
}

// daemonLogTail is the end of the log of a daemon osd daemon start ran detached.
func daemonLogTail(n *node) string {
	b, err := os.ReadFile(filepath.Join(n.stateDir, "logs", "daemon.log"))
	if err != nil {
		return "no daemon.log: " + err.Error()
	}
	return "daemon.log (tail):\n" + tail(string(b), 60)
}

// status is what osd status --format json shows.
func status(t testing.TB, n *node) statusJSON {
	t.Helper()
	out, err := n.osd("status", "--format", "json")
	if err != nil {
		t.Fatalf("osd status: %v\n%s", err, out)
	}
	var st statusJSON
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.Deployment == nil {
		t.Fatalf("osd status --format json: %v\n%s", err, tail(out, 20))
	}
	return st
}

type statusJSON struct {
	Version    string                `json:"version"`
	PID        int                   `json:"pid"`
	Init       *api.InitState        `json:"init"`
	Deployment *api.DeploymentStatus `json:"deployment"`
}

// waitConverged waits until a converge run that started after since (the one a daemon
// runs at its start) succeeded, and returns the status then.
func waitConverged(t testing.TB, n *node, since time.Time, timeout time.Duration) statusJSON {
	t.Helper()
	var last string
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(5 * time.Second) {
		out, err := n.osd("status", "--format", "json")
		last = out
		var st statusJSON
		if err != nil || json.Unmarshal([]byte(out), &st) != nil || st.Init == nil || st.Deployment == nil || st.Init.Started.Before(since) {
			continue
		}
		switch st.Init.State {
		case api.ConvergeSucceeded:
			return st
		case api.ConvergeFailed:
			t.Fatalf("the new daemon's converge failed: %s\n%s", st.Init.Error, daemonLogTail(n))
		}
	}
	t.Fatalf("the new daemon did not converge in %s:\n%s\n%s", timeout, tail(last, 40), daemonLogTail(n))
	return statusJSON{}
}

// changedReleases lists the releases whose revision differs between two deployment
// statuses, as "name a->b".
func changedReleases(before, after *api.DeploymentStatus) []string {
	var changed []string
	for name, b := range before.Children {
		if a := after.Children[name]; a.Revision != b.Revision {
			changed = append(changed, name+" "+strconv.Itoa(b.Revision)+"->"+strconv.Itoa(a.Revision))
		}
	}
	sort.Strings(changed)
	return changed
}

// exited are the processes of a processesMatching list that no longer run.
func exited(procs []string) []string {
	var gone []string
	for _, p := range procs {
		pid, _ := strconv.Atoi(strings.SplitN(p, ":", 2)[0])
		if syscall.Kill(pid, 0) != nil {
			gone = append(gone, p)
		}
	}
	return gone
}

// qemuPID is the process running server id's guest, from libvirt's pid file.
func qemuPID(t *testing.T, n *node, id string) int {
	t.Helper()
	name := n.field(t, "server", "show", id, "-f", "value", "-c", "OS-EXT-SRV-ATTR:instance_name")
	b, err := os.ReadFile("/run/libvirt/qemu/" + name + ".pid")
	if err != nil {
		t.Fatalf("server %s (%s): %v", id, name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || syscall.Kill(pid, 0) != nil {
		t.Fatalf("server %s: QEMU pid %q not running", id, b)
	}
	return pid
}
