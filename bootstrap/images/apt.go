package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/osdcloud/osd/bootstrap/fsutil"
)

// AptDir is a private apt state in Dir (its own lists, an empty dpkg status) that
// resolves and downloads packages from Sources with the host's apt-get, without touching
// the host's apt state. The lists are refreshed when older than MaxAge or when the
// sources changed.
type AptDir struct {
	Dir     string
	Sources []AptSource
	MaxAge  time.Duration
}

func (a AptDir) config() string {
	return fmt.Sprintf(`Dir::State "%[1]s/state";
Dir::State::Lists "%[1]s/lists";
Dir::State::status "%[1]s/status";
Dir::Cache "%[1]s/cache";
Dir::Etc::SourceList "%[1]s/sources.list";
Dir::Etc::SourceParts "%[1]s/sources.list.d";
Dir::Etc::PreferencesParts "%[1]s/preferences.d";
APT::Architecture "amd64";
APT::Architectures { "amd64"; };
Acquire::Languages "none";
APT::Install-Recommends "false";
Debug::NoLocking "true";
APT::Sandbox::User "root";
`, a.Dir)
}

// sourcesList is the sources.list of Sources.
func (a AptDir) sourcesList() string {
	var lines []string
	for _, s := range a.Sources {
		lines = append(lines, s.Line())
	}
	return strings.Join(lines, "\n") + "\n"
}

// prepare writes the apt configuration and sources and returns the configuration's
// path; changed sources drop the freshness stamp so the lists are refreshed.
func (a AptDir) prepare() (string, error) {
	for _, sub := range []string{"state", "lists/partial", "cache/archives/partial", "sources.list.d", "preferences.d"} {
		if err := os.MkdirAll(filepath.Join(a.Dir, sub), 0o755); err != nil {
			return "", err
		}
	}
	// The status stays an empty file; rewritten, its new time would make apt rebuild
	// its package cache at every call.
	status := filepath.Join(a.Dir, "status")
	if st, err := os.Stat(status); err != nil || st.Size() != 0 || !st.Mode().IsRegular() {
		if err := os.WriteFile(status, nil, 0o644); err != nil {
			return "", err
		}
	}
	want := a.sourcesList()
	srcPath := filepath.Join(a.Dir, "sources.list")
	if old, _ := os.ReadFile(srcPath); string(old) != want {
		if err := os.WriteFile(srcPath, []byte(want), 0o644); err != nil {
			return "", err
		}
		os.Remove(filepath.Join(a.Dir, "updated"))
	}
	// Written only when it changed: resolutions run side by side and read it.
	conf := filepath.Join(a.Dir, "apt.conf")
	if old, _ := os.ReadFile(conf); string(old) == a.config() {
		return conf, nil
	}
	return conf, os.WriteFile(conf, []byte(a.config()), 0o644)
}

// Refresh updates the lists when they are older than MaxAge (or the sources changed)
// and builds apt's package cache, so that resolutions and downloads after it only read
// this state and may run side by side.
func (a AptDir) Refresh(ctx context.Context) error {
	conf, err := a.prepare()
	if err != nil {
		return err
	}
	updated, err := a.updateIfStale(ctx, conf)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(a.Dir, "cache", "pkgcache.bin")); err == nil && !updated {
		return nil
	}
	_, err = a.aptGet(ctx, conf, a.Dir, "check")
	return err
}

// Fresh says whether Refresh has nothing to do: the lists are younger than MaxAge
// and apt's package cache is built.
func (a AptDir) Fresh() bool {
	st, err := os.Stat(filepath.Join(a.Dir, "updated"))
	if err != nil || time.Since(st.ModTime()) > a.MaxAge {
		return false
	}
	_, err = os.Stat(filepath.Join(a.Dir, "cache", "pkgcache.bin"))
	return err == nil
}

// Usable says whether Resolve can answer from the lists as they are, fresh or not: they
// were fetched from the current Sources (the stamp, which changed sources drop, is there)
// and apt's package cache is built.
func (a AptDir) Usable() bool {
	if old, err := os.ReadFile(filepath.Join(a.Dir, "sources.list")); err != nil || string(old) != a.sourcesList() {
		return false
	}
	for _, f := range []string{"updated", filepath.Join("cache", "pkgcache.bin")} {
		if _, err := os.Stat(filepath.Join(a.Dir, f)); err != nil {
			return false
		}
	}
	return true
}

// updateIfStale runs apt-get update when the lists are older than MaxAge and says
// whether it did.
func (a AptDir) updateIfStale(ctx context.Context, conf string) (bool, error) {
	stamp := filepath.Join(a.Dir, "updated")
	if st, err := os.Stat(stamp); err == nil && time.Since(st.ModTime()) <= a.MaxAge {
		return false, nil
	}
	if _, err := a.aptGet(ctx, conf, a.Dir, "update"); err != nil {
		return false, err
	}
	return true, os.WriteFile(stamp, nil, 0o644)
}

func (a AptDir) aptGet(ctx context.Context, conf, workdir string, args ...string) ([]byte, error) {
	// apt's binary package caches are named on the command line: a host's apt.conf.d
	// (read after APT_CONFIG) may turn them off, as container images' docker-clean does,
	// and then every call parses the whole lists again (seconds each). So is the archive
	// directory, which stays empty: --print-uris leaves out what it holds.
	opts := []string{"-q", "-o", "Dir::Cache::pkgcache=pkgcache.bin", "-o", "Dir::Cache::srcpkgcache=srcpkgcache.bin",
		"-o", "Dir::Cache::archives=" + filepath.Join(a.Dir, "cache", "archives") + "/"}
	cmd := exec.CommandContext(ctx, "apt-get", append(opts, args...)...)
	cmd.Env = append(os.Environ(), "APT_CONFIG="+conf, "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive")
	cmd.Dir = workdir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("apt-get %s: %w: %s", strings.Join(args, " "), err, lastLines(errb.String(), 5))
	}
	return out.Bytes(), nil
}

// Resolve returns package -> version for everything `apt-get install` of base (a
// selection such as an mmdebstrap variant's base set, or nothing) plus pkgs installs
// now: with an empty dpkg status, the whole dependency closure. The answer is
// remembered until the lists are refreshed.
func (a AptDir) Resolve(ctx context.Context, base, pkgs []string) (map[string]string, error) {
	conf, err := a.prepare()
	if err != nil {
		return nil, err
	}
	if _, err := a.updateIfStale(ctx, conf); err != nil {
		return nil, err
	}
	index, err := a.listsIndex()
	if err != nil {
		return nil, err
	}
	sorted := append([]string(nil), pkgs...)
	sort.Strings(sorted)
	sum := sha256.Sum256([]byte(strings.Join(base, " ") + "\n" + strings.Join(sorted, "\n")))
	memo := filepath.Join(a.Dir, "resolved", hex.EncodeToString(sum[:])+".json")
	var m resolveMemo
	if b, err := os.ReadFile(memo); err == nil && json.Unmarshal(b, &m) == nil && m.Index == index && len(m.Versions) > 0 {
		return m.Versions, nil
	}
	// --print-uris lists what the installation would download (this state's archive
	// directory stays empty: everything) without ordering the installation, which
	// `install -s` does and which takes three times as long.
	args := append(append([]string{"install", "--print-uris", "-y"}, base...), pkgs...)
	out, err := a.aptGet(ctx, conf, a.Dir, args...)
	if err != nil {
		return nil, err
	}
	vers, err := ParseAptURIs(string(out))
	if err != nil {
		return nil, err
	}
	if len(vers) == 0 {
		return nil, fmt.Errorf("apt-get install --print-uris %s lists nothing to install", strings.Join(pkgs, " "))
	}
	if b, err := json.Marshal(resolveMemo{Index: index, Versions: vers}); err == nil {
		// A lost memo only costs time; written whole (renamed into place), as
		// resolutions of chains with a common base run side by side.
		if os.MkdirAll(filepath.Dir(memo), 0o755) == nil {
			_ = fsutil.WriteAtomic(memo, 0o600, func(w io.Writer) error {
				_, err := w.Write(b)
				return err
			})
		}
	}
	return vers, nil
}

// resolveMemo is a resolution remembered for one state of the package indexes (listsIndex).
type resolveMemo struct {
	Index    string
	Versions map[string]string
}

// listsIndex identifies the package indexes the lists hold: each Packages file's name, size
// and modification time (apt gives a fetched file the archive's). A refresh that fetched
// no new index (the archive's Release files re-signed, no package changed) leaves it as it
// was, so the resolutions remembered before it still count.
func (a AptDir) listsIndex() (string, error) {
	dir := filepath.Join(a.Dir, "lists")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	n := 0
	for _, e := range ents { // sorted by name
		if !e.Type().IsRegular() || !strings.Contains(e.Name(), "_Packages") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d %d\n", e.Name(), info.Size(), info.ModTime().UnixNano())
		n++
	}
	if n == 0 {
		return "", fmt.Errorf("no package index in %s (apt-get update fetched none)", dir)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Download fetches name=version .debs into dir (kept there: a second call downloads
// nothing) and returns their paths by package name.
func (a AptDir) Download(ctx context.Context, dir string, want map[string]string) (map[string]string, error) {
	conf, err := a.prepare()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var missing []string
	for name, ver := range want {
		if _, ok := findDeb(dir, name, ver); !ok {
			missing = append(missing, name+"="+ver)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		if _, err := a.aptGet(ctx, conf, dir, append([]string{"download"}, missing...)...); err != nil {
			return nil, err
		}
	}
	paths := map[string]string{}
	for name, ver := range want {
		p, ok := findDeb(dir, name, ver)
		if !ok {
			return nil, fmt.Errorf("apt-get download %s: no %s afterwards", name, DebFileName(name, ver))
		}
		paths[name] = p
	}
	return paths, nil
}

// findDeb returns the downloaded archive of name=version in dir: amd64, or all for an
// architecture-independent package.
func findDeb(dir, name, version string) (string, bool) {
	amd64 := DebFileName(name, version)
	for _, f := range []string{amd64, strings.TrimSuffix(amd64, "_amd64.deb") + "_all.deb"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return filepath.Join(dir, f), true
		}
	}
	return "", false
}

// DebFileName is the name apt gives a downloaded amd64 archive (":" in the version
// escaped as %3a); an architecture-independent package ends in _all.deb instead.
func DebFileName(name, version string) string {
	return name + "_" + strings.ReplaceAll(version, ":", "%3a") + "_amd64.deb"
}
