package test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/osdcloud/osd/bootstrap/images"
)

// artifact is a package make built: the file env names (make test sets OSD_DEB and
// OSD_SNAP), else the newest dist/osd_*.EXT; the test is skipped when there is none.
func artifact(t testing.TB, env, ext, target string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(abs); err != nil {
			t.Fatalf("%s=%s: %v (run make %s)", env, p, err, target)
		}
		return abs
	}
	found, _ := filepath.Glob("../dist/osd_*." + ext)
	sort.Slice(found, func(i, j int) bool { return modTime(found[i]).After(modTime(found[j])) })
	if len(found) == 0 {
		t.Skipf("no package in dist/: run make %s (or set %s)", target, env)
	}
	abs, _ := filepath.Abs(found[0])
	return abs
}

func modTime(p string) time.Time {
	st, err := os.Stat(p)
	if err != nil {
		return time.Time{}
	}
	return st.ModTime()
}

// requireTools fails the test when a tool test/deps.sh installs is missing: a machine
// prepared by it has them all.
func requireTools(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			pkg := toolPackages[tool]
			if pkg == "" {
				pkg = tool
			}
			t.Fatalf("%s not installed: install Debian's %s (test/deps.sh does): %v", tool, pkg, err)
		}
	}
}

// toolPackages are the Debian packages of the tools the package tests run.
var toolPackages = map[string]string{
	"unsquashfs": "squashfs-tools", "snap": "snapd", "systemd-analyze": "systemd",
	"chroot": "coreutils", "apt-get": "apt", "dpkg": "dpkg", "dpkg-deb": "dpkg",
}

// run runs a command, failing the test with its output when it fails.
func run(t testing.TB, timeout time.Duration, env []string, name string, args ...string) string {
	t.Helper()
	out, err := runErr(timeout, env, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, tail(out, 60))
	}
	return out
}

func runErr(timeout time.Duration, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// debField reads one field of a .deb's control file.
func debField(t testing.TB, deb, field string) string {
	t.Helper()
	return strings.TrimSpace(run(t, time.Minute, nil, "dpkg-deb", "--field", deb, field))
}

// relationNames are the package names of a Depends-style field, without versions.
func relationNames(field string) []string {
	var names []string
	for _, rel := range strings.Split(field, ",") {
		if f := strings.Fields(rel); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	sort.Strings(names)
	return names
}

// chroot is a clean Debian root (12 or 13) made with mmdebstrap, never having seen osd, with
// /proc, /sys and /dev mounted for the packages' scripts. Services are kept from starting
// (policy-rc.d), so nothing it installs runs on the host.
type chroot struct {
	t      testing.TB
	dir    string
	mounts []string
}

// debCacheDir keeps the .debs the clean roots download, next to the image builder's.
const debCacheDir = "/var/cache/osd/cache/debs"

// newChroot makes a clean root of Debian suite from the host's mirror (images.HostSources),
// with proc, sys and dev mounted; the test's cleanup unmounts and removes it.
func newChroot(t testing.TB, suite string) *chroot {
	t.Helper()
	requireTools(t, "mmdebstrap", "chroot")
	srcs, err := images.HostSources(suite)
	if err != nil {
		t.Fatalf("the clean root needs the host's apt source for %s: %v", suite, err)
	}
	base, err := os.MkdirTemp("", "osd-clean-root-")
	if err != nil {
		t.Fatal(err)
	}
	c := &chroot{t: t, dir: filepath.Join(base, "root")}
	t.Cleanup(func() {
		c.unmountAll()
		if err := os.RemoveAll(base); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	cache := filepath.Join(debCacheDir, "package-test")
	if suite != "bookworm" {
		cache += "-" + suite
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"--mode=root", "--variant=apt", "--format=directory", "--quiet",
		"--aptopt=Acquire::Languages \"none\"",
		"--skip=cleanup/apt/lists",
		"--setup-hook=mkdir -p \"$1/var/cache/apt/archives\"",
		"--setup-hook=sync-in " + cache + " /var/cache/apt/archives/",
		"--customize-hook=sync-out /var/cache/apt/archives " + cache,
		suite, c.dir}
	for _, s := range srcs {
		args = append(args, s.Line())
	}
	start := time.Now()
	run(t, 10*time.Minute, []string{"LC_ALL=C.UTF-8"}, "mmdebstrap", args...)
	t.Logf("mmdebstrap: a clean %s root in %s", suite, time.Since(start).Round(100*time.Millisecond))
	for _, m := range []struct{ src, dst, fs string }{
		{"proc", "proc", "proc"}, {"sysfs", "sys", "sysfs"}, {"/dev", "dev", ""}, {"/dev/pts", "dev/pts", ""},
	} {
		dst := filepath.Join(c.dir, m.dst)
		os.MkdirAll(dst, 0o755)
		var err error
		if m.fs == "" {
			err = unix.Mount(m.src, dst, "", unix.MS_BIND, "")
		} else {
			err = unix.Mount(m.src, dst, m.fs, 0, "")
		}
		if err != nil {
			t.Fatalf("mount %s on %s: %v", m.src, dst, err)
		}
		c.mounts = append(c.mounts, dst)
	}
	c.write("/usr/sbin/policy-rc.d", "#!/bin/sh\nexit 101\n", 0o755)
	if b, err := os.ReadFile("/etc/resolv.conf"); err == nil {
		c.write("/etc/resolv.conf", string(b), 0o644)
	}
	// The image builder's cached .debs, linked in: apt takes those of the right version.
	others, _ := filepath.Glob(filepath.Join(debCacheDir, "*", "*.deb"))
	for _, p := range others {
		os.Link(p, filepath.Join(c.dir, "var/cache/apt/archives", filepath.Base(p)))
	}
	t.Cleanup(func() { c.saveDebs(cache) })
	return c
}

// saveDebs links the .debs the root downloaded into the cache for the next run.
func (c *chroot) saveDebs(cache string) {
	debs, _ := filepath.Glob(filepath.Join(c.dir, "var/cache/apt/archives/*.deb"))
	for _, p := range debs {
		dst := filepath.Join(cache, filepath.Base(p))
		if _, err := os.Stat(dst); err != nil {
			if os.Link(p, dst) != nil {
				exec.Command("cp", p, dst).Run()
			}
		}
	}
}

func (c *chroot) unmountAll() {
	for i := len(c.mounts) - 1; i >= 0; i-- {
		if err := unix.Unmount(c.mounts[i], unix.MNT_DETACH); err != nil {
			c.t.Errorf("cleanup: unmount %s: %v", c.mounts[i], err)
		}
	}
	c.mounts = nil
}

func (c *chroot) path(p string) string { return filepath.Join(c.dir, p) }

func (c *chroot) write(p, content string, mode os.FileMode) {
	c.t.Helper()
	if err := os.MkdirAll(filepath.Dir(c.path(p)), 0o755); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(c.path(p), []byte(content), mode); err != nil {
		c.t.Fatal(err)
	}
}

// sh runs a shell command in the root and returns its output and error.
func (c *chroot) sh(timeout time.Duration, script string) (string, error) {
	return runErr(timeout, []string{"DEBIAN_FRONTEND=noninteractive", "LC_ALL=C.UTF-8",
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, "chroot", c.dir, "/bin/sh", "-ec", script)
}

// mustSh is sh, failing the test when the command fails.
func (c *chroot) mustSh(timeout time.Duration, script string) string {
	c.t.Helper()
	out, err := c.sh(timeout, script)
	if err != nil {
		c.t.Fatalf("in the clean root: %s: %v\n%s", script, err, tail(out, 60))
	}
	return out
}

// installed is the set of packages dpkg has installed in the root.
func (c *chroot) installed() map[string]bool {
	c.t.Helper()
	out := c.mustSh(time.Minute, "dpkg-query -W -f '${db:Status-Abbrev} ${Package}\\n'")
	set := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "ii" {
			set[f[1]] = true
		}
	}
	return set
}

func (c *chroot) exists(p string) bool {
	_, err := os.Lstat(c.path(p))
	return err == nil
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}
