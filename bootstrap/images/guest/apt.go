package guest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/osdcloud/osd/bootstrap/images"
)

// aptDir is a private apt state (own lists, empty dpkg status) that resolves
// and downloads packages from the configured sources without touching the
// host's apt state.
type aptDir struct {
	dir     string
	sources []images.AptSource
	maxAge  time.Duration
}

func (a aptDir) config() string {
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
`, a.dir)
}

// prepare writes the apt configuration and sources; changed sources drop the
// freshness stamp so the lists are refreshed.
func (a aptDir) prepare() (string, error) {
	for _, sub := range []string{"state", "lists/partial", "cache/archives/partial", "sources.list.d", "preferences.d"} {
		if err := os.MkdirAll(filepath.Join(a.dir, sub), 0o755); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(a.dir, "status"), nil, 0o644); err != nil {
		return "", err
	}
	var lines []string
	for _, s := range a.sources {
		lines = append(lines, s.Line())
	}
	want := strings.Join(lines, "\n") + "\n"
	srcPath := filepath.Join(a.dir, "sources.list")
	if old, _ := os.ReadFile(srcPath); string(old) != want {
		if err := os.WriteFile(srcPath, []byte(want), 0o644); err != nil {
			return "", err
		}
		os.Remove(filepath.Join(a.dir, "updated"))
	}
	conf := filepath.Join(a.dir, "apt.conf")
	return conf, os.WriteFile(conf, []byte(a.config()), 0o644)
}

func (a aptDir) run(ctx context.Context, conf, workdir, tool string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, tool, append([]string{"-q"}, args...)...)
	cmd.Env = append(os.Environ(), "APT_CONFIG="+conf, "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive")
	cmd.Dir = workdir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", tool, strings.Join(args, " "), err, lastLines(errb.String(), 5))
	}
	return out.Bytes(), nil
}

// resolve refreshes the lists when older than maxAge and returns the
// versions apt would install now for pkgs (with an empty dpkg status, so the
// whole dependency closure is listed).
func (a aptDir) resolve(ctx context.Context, pkgs []string) (map[string]string, error) {
	conf, err := a.prepare()
	if err != nil {
		return nil, err
	}
	stamp := filepath.Join(a.dir, "updated")
	if st, err := os.Stat(stamp); err != nil || time.Since(st.ModTime()) > a.maxAge {
		if _, err := a.run(ctx, conf, a.dir, "apt-get", "update"); err != nil {
			return nil, err
		}
		if err := os.WriteFile(stamp, nil, 0o644); err != nil {
			return nil, err
		}
	}
	// The answer depends only on the lists and the request: remember it
	// until the lists are refreshed.
	st, err := os.Stat(stamp)
	if err != nil {
		return nil, err
	}
	memoPath := filepath.Join(a.dir, "resolved.json")
	var memo struct {
		Lists    int64
		Request  string
		Versions map[string]string
	}
	req := strings.Join(pkgs, " ")
	if b, err := os.ReadFile(memoPath); err == nil && json.Unmarshal(b, &memo) == nil &&
		memo.Lists == st.ModTime().UnixNano() && memo.Request == req && len(memo.Versions) > 0 {
		return memo.Versions, nil
	}
	out, err := a.run(ctx, conf, a.dir, "apt-get", append([]string{"install", "-s", "-y"}, pkgs...)...)
	if err != nil {
		return nil, err
	}
	vers := images.ParseAptSimulation(string(out))
	if len(vers) == 0 {
		return nil, fmt.Errorf("apt-get install -s %s installed nothing", req)
	}
	memo.Lists, memo.Request, memo.Versions = st.ModTime().UnixNano(), req, vers
	if b, err := json.Marshal(memo); err == nil {
		_ = os.WriteFile(memoPath, b, 0o644) // a lost memo only costs time
	}
	return vers, nil
}

// download fetches name=version .debs into dir (kept there: a second build
// downloads nothing) and returns their paths by package name.
func (a aptDir) download(ctx context.Context, dir string, want map[string]string) (map[string]string, error) {
	conf, err := a.prepare()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	paths := map[string]string{}
	var missing []string
	for name, ver := range want {
		p := filepath.Join(dir, debFileName(name, ver))
		paths[name] = p
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, name+"="+ver)
		}
	}
	if len(missing) > 0 {
		if _, err := a.run(ctx, conf, dir, "apt-get", append([]string{"download"}, missing...)...); err != nil {
			return nil, err
		}
	}
	for name, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("apt-get download %s: no %s afterwards", name, filepath.Base(p))
		}
	}
	return paths, nil
}

// debFileName is the name apt gives a downloaded archive (":" in the
// version escaped as %3a).
func debFileName(name, version string) string {
	return name + "_" + strings.ReplaceAll(version, ":", "%3a") + "_amd64.deb"
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "; ")
}
