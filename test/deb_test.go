package test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/osdcloud/osd/bootstrap/preflight"
)

// TestDebInCleanDebian installs the .deb with apt in a clean root of each Debian release
// osd supports as a host, 12 (bookworm) and 13 (trixie) (made with mmdebstrap, never
// having seen osd): apt pulls the dependencies the package declares, which are exactly the
// list preflight checks, and they resolve in that release; the unit is installed and
// enabled (not started), the completions and man pages are there, osd version and osd
// preflight run; removal keeps /var/lib/osd, a downgrade over its state is refused, purge
// deletes it.
func TestDebInCleanDebian(t *testing.T) {
	requireRoot(t)
	deb := artifact(t, "OSD_DEB", "deb", "deb")
	for _, suite := range []string{"bookworm", "trixie"} {
		t.Run(suite, func(t *testing.T) { debInCleanDebian(t, deb, suite) })
	}
}

func debInCleanDebian(t *testing.T, deb, suite string) {
	version := debField(t, deb, "Version")

	// The control file's relations are the shared list, plus the C library the binary links.
	list := preflight.HostPackages(readFile(t, "../bootstrap/preflight/packages.txt"))
	want := append([]string{"libc6"}, list["depends"]...)
	if got := relationNames(debField(t, deb, "Depends")); !sameSet(got, want) {
		t.Errorf("Depends = %v, want exactly %v (packages.txt's depends and libc6)", got, want)
	}
	if got := relationNames(debField(t, deb, "Recommends")); !sameSet(got, list["recommends"]) {
		t.Errorf("Recommends = %v, want %v (packages.txt's recommends)", got, list["recommends"])
	}

	c := newChroot(t, suite)
	before := c.installed()
	if err := os.Link(deb, c.path("/tmp/osd.deb")); err != nil {
		run(t, time.Minute, nil, "cp", deb, c.path("/tmp/osd.deb"))
	}
	start := time.Now()
	c.mustSh(15*time.Minute, "apt-get update -qq && apt-get install -y -q --no-install-recommends /tmp/osd.deb")
	t.Logf("apt-get install ./osd.deb: %s", time.Since(start).Round(100*time.Millisecond))
	after := c.installed()
	var added []string
	for p := range after {
		if !before[p] {
			added = append(added, p)
		}
	}
	t.Logf("apt installed %d packages with osd", len(added))
	for _, p := range append(want, "osd") {
		if !after[p] {
			t.Errorf("after apt-get install ./osd.deb, %s is not installed", p)
		}
	}
	for _, p := range list["recommends"] {
		if after[p] && !before[p] {
			t.Errorf("apt installed %s with --no-install-recommends: it is a dependency of something osd depends on, or Depends is wrong", p)
		}
	}
	if out := c.mustSh(time.Minute, "dpkg --audit"); strings.TrimSpace(out) != "" {
		t.Errorf("dpkg --audit after the install:\n%s", out)
	}

	t.Run("files", func(t *testing.T) {
		for _, p := range []string{
			"/usr/bin/osd", "/lib/systemd/system/osd.service",
			"/etc/systemd/system/multi-user.target.wants/osd.service", // enabled, not started
			"/usr/share/bash-completion/completions/osd", "/usr/share/zsh/vendor-completions/_osd",
			"/usr/share/fish/vendor_completions.d/osd.fish",
			"/usr/share/man/man1/osd.1.gz", "/usr/share/man/man1/osd-init.1.gz", "/usr/share/man/man1/osd-upgrades.1.gz",
			"/usr/share/doc/osd/copyright", "/usr/share/doc/osd/changelog.gz",
		} {
			if !c.exists(p) {
				t.Errorf("%s: not installed", p)
			}
		}
		if c.exists("/var/lib/osd") {
			t.Errorf("/var/lib/osd exists after the install: the package must not start a cloud")
		}
		if out := c.mustSh(time.Minute, "bash -c '. /usr/share/bash-completion/completions/osd && type __start_osd >/dev/null && echo ok'"); !strings.Contains(out, "ok") {
			t.Errorf("the bash completion does not load: %s", out)
		}
	})

	t.Run("osd runs", func(t *testing.T) {
		out := c.mustSh(time.Minute, "osd --version")
		self := run(t, time.Minute, nil, osdBin(t), "--version")
		if out != self {
			t.Errorf("osd --version in the root = %q, want %q (the binary packaged)", out, self)
		}
		if out := c.mustSh(time.Minute, "osd version"); !strings.Contains(out, "client: ") || !strings.Contains(out, "daemon: unavailable") {
			t.Errorf("osd version = %q, want the client's version and the daemon unavailable", out)
		}
		// preflight may fail other checks in a chroot; the packages it needs are what the
		// .deb pulled in.
		out, _ = c.sh(2*time.Minute, "osd preflight --format json")
		var rep struct {
			Findings []preflight.Finding `json:"findings"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("osd preflight --format json: %v\n%s", err, tail(out, 30))
		}
		seen := false
		for _, f := range rep.Findings {
			if f.Check == preflight.CheckPackages {
				seen = true
				if f.Status != preflight.OK {
					t.Errorf("osd preflight in the root: %s %s: %s (fix: %s), want ok", f.Check, f.Status, f.Message, f.Fix)
				}
			}
		}
		if !seen {
			t.Errorf("osd preflight reported no %s finding:\n%s", preflight.CheckPackages, tail(out, 30))
		}
	})

	t.Run("systemd-analyze verify", func(t *testing.T) {
		requireTools(t, "systemd-analyze")
		// It checks the unit's Documentation= with man(1), which MANPATH points at the root.
		out, err := runErr(time.Minute, []string{"MANPATH=" + c.path("/usr/share/man")}, "systemd-analyze", "verify", "--root="+c.dir, "/lib/systemd/system/osd.service")
		if err != nil || len(osdLines(out)) > 0 {
			t.Errorf("systemd-analyze verify osd.service: %v\n%s", err, out)
		} else if strings.TrimSpace(out) != "" {
			// The host's systemd-analyze reads the root's own units too: a newer Debian's
			// use keys an older systemd does not know. Only osd's unit is judged.
			t.Logf("systemd-analyze on the root's own units (not osd's):\n%s", out)
		}
	})

	// A cloud's state, as osd init leaves it (the daemon is not run here).
	c.write("/var/lib/osd/osd.db", "state", 0o600)

	t.Run("remove keeps the state", func(t *testing.T) {
		c.mustSh(5*time.Minute, "apt-get remove -y -q osd")
		if c.exists("/usr/bin/osd") || c.exists("/lib/systemd/system/osd.service") {
			t.Errorf("apt-get remove osd left the binary or the unit")
		}
		if !c.exists("/var/lib/osd/osd.db") {
			t.Errorf("apt-get remove osd deleted /var/lib/osd: only purge may")
		}
	})

	t.Run("downgrade refused", func(t *testing.T) {
		c.mustSh(5*time.Minute, "dpkg -i /tmp/osd.deb")
		older := olderDeb(t, deb, version, "0.0.0+1.gdowngrade")
		os.Rename(older, c.path("/tmp/older.deb"))
		out, err := c.sh(5*time.Minute, "dpkg -i /tmp/older.deb")
		if err == nil || !strings.Contains(out, "refusing to downgrade from "+version+" to 0.0.0+1.gdowngrade") {
			t.Errorf("dpkg -i of an older osd over the state = %v, want a refusal naming both versions:\n%s", err, out)
		}
		if got := strings.TrimSpace(c.mustSh(time.Minute, "dpkg-query -W -f '${Version} ${db:Status-Abbrev}' osd")); got != version+" ii" {
			t.Errorf("after the refused downgrade osd is %q, want %q installed", got, version)
		}
		c.mustSh(5*time.Minute, "apt-get remove -y -q osd")
	})

	t.Run("purge deletes the state", func(t *testing.T) {
		c.mustSh(5*time.Minute, "apt-get purge -y -q osd")
		if c.exists("/var/lib/osd") {
			t.Errorf("apt-get purge osd left /var/lib/osd")
		}
		if c.exists("/etc/systemd/system/osd.service") || c.exists("/etc/systemd/system/multi-user.target.wants/osd.service") {
			t.Errorf("apt-get purge osd left the unit's mask or enablement link")
		}
	})
}

// olderDeb repacks deb as version to (its maintainer scripts know their version too).
func olderDeb(t *testing.T, deb, from, to string) string {
	t.Helper()
	dir := t.TempDir()
	tree := filepath.Join(dir, "tree")
	run(t, 5*time.Minute, nil, "dpkg-deb", "-R", deb, tree)
	for _, f := range []string{"control", "preinst", "prerm", "postinst", "postrm"} {
		p := filepath.Join(tree, "DEBIAN", f)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b = regexp.MustCompile(regexp.QuoteMeta(from)).ReplaceAll(b, []byte(to))
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(tree, "DEBIAN", "control"), 0o644)
	out := filepath.Join(dir, "older.deb")
	run(t, 5*time.Minute, nil, "dpkg-deb", "--root-owner-group", "-Zzstd", "-b", tree, out)
	return out
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func sameSet(a, b []string) bool {
	set := func(l []string) map[string]bool {
		m := map[string]bool{}
		for _, s := range l {
			m[s] = true
		}
		return m
	}
	return reflect.DeepEqual(set(a), set(b))
}

// osdLines are the lines of systemd-analyze's output about osd's unit.
func osdLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "osd.service") || strings.Contains(l, "/usr/bin/osd") {
			lines = append(lines, l)
		}
	}
	return lines
}
