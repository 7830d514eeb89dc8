package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// installedNode is the cloud the installed package runs: /usr/bin/osd on the default
// state and run dirs.
func installedNode(t *testing.T) *node {
	return &node{t: t, bin: "/usr/bin/osd", stateDir: "/var/lib/osd", runDir: "/run/osd", log: &lockedBuffer{}}
}

// TestPackageUpgrade (make upgrade-e2e, not part of make test: it deploys a cloud of its
// own) installs the .deb built from the previous commit (OSD_UPGRADE_FROM, default HEAD~1)
// on this host, brings the cloud up with osd init and creates a server, then installs the
// current .deb over the running cloud. The daemon is restarted under its workloads: the
// server keeps running (same QEMU process), so do the pods (same shim processes), no Helm
// release whose values did not change gets a new revision, osd status shows the new
// version, Keystone issues a token. A downgrade back to the previous package is refused.
// It ends with osd reset and dpkg --purge.
func TestPackageUpgrade(t *testing.T) {
	if os.Getenv("OSD_UPGRADE_E2E") == "" {
		t.Skip("set OSD_UPGRADE_E2E=1 (make upgrade-e2e): it deploys a cloud of its own from the previous commit's package")
	}
	requireE2E(t)
	hostToItself(t)
	requireTools(t, "git", "apt-get", "dpkg", "make")
	if out, err := exec.Command("dpkg-query", "-W", "-f", "${db:Status-Abbrev}", "osd").Output(); err == nil && strings.HasPrefix(string(out), "i") {
		t.Fatalf("the osd package is installed on this host already: dpkg --purge osd first")
	}
	if _, err := os.Stat("/var/lib/osd"); err == nil {
		t.Fatalf("/var/lib/osd exists (a cloud on this host?): osd reset first")
	}
	newDeb := artifact(t, "OSD_DEB", "deb", "deb")
	from := os.Getenv("OSD_UPGRADE_FROM")
	if from == "" {
		from = "HEAD~1"
	}
	oldDeb := debAt(t, from)
	oldVersion, newVersion := debField(t, oldDeb, "Version"), debField(t, newDeb, "Version")
	if exec.Command("dpkg", "--compare-versions", newVersion, "gt", oldVersion).Run() != nil {
		t.Fatalf("the current package %s is not newer than %s's %s", newVersion, from, oldVersion)
	}
	n := installedNode(t)
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile("/var/lib/osd/logs/daemon.log"); err == nil {
				t.Logf("daemon.log (tail):\n%s", tail(string(b), 60))
			}
		}
		bin := n.bin
		if _, err := os.Stat(bin); err != nil {
			bin = osdBin(t)
		}
		if out, err := runErr(15*time.Minute, nil, bin, "reset", "--yes"); err != nil {
			t.Errorf("cleanup: osd reset: %v\n%s", err, tail(out, 30))
		}
		if out, err := runErr(5*time.Minute, []string{"DEBIAN_FRONTEND=noninteractive"}, "dpkg", "--purge", "osd"); err != nil {
			t.Errorf("cleanup: dpkg --purge osd: %v\n%s", err, out)
		}
	})

	t0 := time.Now()
	aptInstall(t, oldDeb)
	out, err := n.osd("init", "--timeout", "45m")
	if err != nil {
		t.Fatalf("osd init with %s's package: %v\n%s", from, err, tail(out, 40))
	}
	t.Logf("%s installed and the cloud up in %s", oldVersion, time.Since(t0).Round(time.Second))
	before := status(t, n)

	out, err = n.openstack("server", "create", "--flavor", "m1.tiny", "--image", "osd-test", "--network", "osd-net", "--wait", "-f", "value", "-c", "id", "upgrade-server")
	id := strings.TrimSpace(out)
	if err != nil || !uuidRE.MatchString(id) {
		t.Fatalf("server create: %v\n%s", err, out)
	}
	defer n.openstack("server", "delete", "--wait", id)
	qemu := qemuPID(t, n, id)
	t.Logf("server %s runs as QEMU process %d", id, qemu)

	shims := processesMatching("containerd-shim-runc-v2")
	t1 := time.Now()
	out = aptInstall(t, newDeb)
	for _, want := range []string{"its workloads keep running", "state database backed up to /var/lib/osd/osd.db.pre-upgrade", "the osd daemon is running (version"} {
		if !strings.Contains(out, want) {
			t.Errorf("apt-get install of the newer package did not say %q:\n%s", want, tail(out, 30))
		}
	}
	after := waitConverged(t, n, t1, 30*time.Minute)
	t.Logf("upgraded to %s and converged in %s", newVersion, time.Since(t1).Round(time.Second))

	osdVersion := strings.TrimPrefix(strings.TrimSpace(run(t, time.Minute, nil, "/usr/bin/osd", "--version")), "osd ")
	t.Logf("osd status: version %s before, %s after", before.Version, after.Version)
	if after.Version != osdVersion || before.Version == after.Version {
		t.Errorf("osd status version before %q, after %q: want the new daemon's %q after", before.Version, after.Version, osdVersion)
	}
	if _, err := os.Stat("/var/lib/osd/osd.db.pre-upgrade"); err != nil {
		t.Errorf("no state backup: %v", err)
	}
	if pid := qemuPID(t, n, id); pid != qemu {
		t.Errorf("server's QEMU process after the upgrade = %d, want %d (the guest must keep running)", pid, qemu)
	}
	if st := n.field(t, "server", "show", id, "-f", "value", "-c", "status"); st != "ACTIVE" {
		t.Errorf("server status after the upgrade = %s, want ACTIVE", st)
	}
	var changed []string
	for name, b := range before.Deployment.Children {
		a := after.Deployment.Children[name]
		switch {
		case a.ValuesHash != b.ValuesHash:
			changed = append(changed, name+" "+strconv.Itoa(b.Revision)+"->"+strconv.Itoa(a.Revision))
		case a.Revision != b.Revision:
			t.Errorf("release %s: values unchanged, revision %d -> %d: want no upgrade", name, b.Revision, a.Revision)
		}
	}
	t.Logf("releases whose values changed between the commits: %v", changed)
	// The pods ran on through the restart: their shims (one per pod) are the same
	// processes, unless a release was upgraded and replaced some of them.
	var gone []string
	for _, p := range shims {
		pid, _ := strconv.Atoi(strings.SplitN(p, ":", 2)[0])
		if syscall.Kill(pid, 0) != nil {
			gone = append(gone, p)
		}
	}
	t.Logf("%d of the %d pod shims running before the upgrade still run", len(shims)-len(gone), len(shims))
	if len(shims) == 0 || (len(changed) == 0 && len(gone) > 0) {
		t.Errorf("pods were restarted by the upgrade although no release changed (shims gone: %v)", gone)
	}
	if out, err := n.openstack("token", "issue", "-f", "value", "-c", "id"); err != nil || strings.TrimSpace(out) == "" {
		t.Errorf("openstack token issue after the upgrade: %v\n%s", err, out)
	}

	out, err = runErr(10*time.Minute, []string{"DEBIAN_FRONTEND=noninteractive"}, "apt-get", "install", "-y", "--allow-downgrades", oldDeb)
	if err == nil || !strings.Contains(out, "refusing to downgrade from "+newVersion+" to "+oldVersion) {
		t.Errorf("installing %s over %s's state = %v, want a refusal:\n%s", oldVersion, newVersion, err, tail(out, 20))
	}
	if got := strings.TrimSpace(run(t, time.Minute, nil, "dpkg-query", "-W", "-f", "${Version}", "osd")); got != newVersion {
		t.Errorf("after the refused downgrade the package is %s, want %s", got, newVersion)
	}
}

// debAt builds the .deb of another commit in a temporary git worktree.
func debAt(t *testing.T, rev string) string {
	t.Helper()
	top, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "src")
	if out, err := runErr(5*time.Minute, nil, "git", "-C", top, "worktree", "add", "--detach", dir, rev); err != nil {
		t.Fatalf("no git worktree of %s (a shallow clone? set OSD_UPGRADE_FROM): %v\n%s", rev, err, out)
	}
	t.Cleanup(func() { exec.Command("git", "-C", top, "worktree", "remove", "--force", dir).Run() })
	if _, err := os.Stat(filepath.Join(dir, "snap/deb/build.sh")); err != nil {
		t.Fatalf("%s has no .deb packaging (make deb): set OSD_UPGRADE_FROM to a later commit", rev)
	}
	t0 := time.Now()
	run(t, 40*time.Minute, nil, "make", "-C", dir, "deb")
	debs, _ := filepath.Glob(filepath.Join(dir, "dist", "osd_*.deb"))
	if len(debs) != 1 {
		t.Fatalf("make deb in %s's worktree made %v, want one .deb", rev, debs)
	}
	t.Logf("built %s from %s in %s", filepath.Base(debs[0]), rev, time.Since(t0).Round(time.Second))
	return debs[0]
}

func aptInstall(t *testing.T, deb string) string {
	t.Helper()
	return run(t, 30*time.Minute, []string{"DEBIAN_FRONTEND=noninteractive"}, "apt-get", "install", "-y", "--no-install-recommends", deb)
}
