package images

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Package versions are resolved with the host's apt-get against a private
// apt state under the state directory (its own lists, an empty dpkg status),
// using the same sources the build uses: `apt-get install -s` of the
// variant's base set plus the recipe's packages prints the full closure with
// the candidate versions, which is what mmdebstrap would install now. The
// lists are refreshed when older than Builder.ListsMaxAge.

// aptResolver resolves package closures in dir.
type aptResolver struct {
	dir     string
	sources []AptSource
	maxAge  time.Duration
}

func (a aptResolver) config() string {
	d := a.dir
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
`, d)
}

func (a aptResolver) prepare() (string, error) {
	for _, sub := range []string{"state", "lists/partial", "cache/archives/partial", "sources.list.d", "preferences.d"} {
		if err := os.MkdirAll(filepath.Join(a.dir, sub), 0o755); err != nil {
			return "", err
		}
	}
	status := filepath.Join(a.dir, "status")
	if err := os.WriteFile(status, nil, 0o644); err != nil {
		return "", err
	}
	var lines []string
	for _, s := range a.sources {
		lines = append(lines, s.Line())
	}
	srcPath := filepath.Join(a.dir, "sources.list")
	want := strings.Join(lines, "\n") + "\n"
	if old, _ := os.ReadFile(srcPath); string(old) != want {
		if err := os.WriteFile(srcPath, []byte(want), 0o644); err != nil {
			return "", err
		}
		os.Remove(filepath.Join(a.dir, "updated")) // sources changed: refresh lists
	}
	conf := filepath.Join(a.dir, "apt.conf")
	return conf, os.WriteFile(conf, []byte(a.config()), 0o644)
}

func (a aptResolver) aptGet(ctx context.Context, conf string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "apt-get", append([]string{"-q"}, args...)...)
	cmd.Env = append(os.Environ(), "APT_CONFIG="+conf, "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("apt-get %s: %w: %s", strings.Join(args, " "), err, lastLines(errb.String(), 5))
	}
	return out.Bytes(), nil
}

// baseSet is the apt-get selection mmdebstrap installs for a variant before
// the included packages.
func baseSet(variant string) []string {
	switch variant {
	case "essential":
		return []string{"?essential"}
	case "apt":
		return []string{"?essential", "apt"}
	case "", "minbase", "required":
		return []string{"?or(?essential,?priority(required))", "apt"}
	default: // custom, extract: only the included packages
		return nil
	}
}

// resolve returns package -> version for everything variant+pkgs installs.
func (a aptResolver) resolve(ctx context.Context, variant string, pkgs []string) (map[string]string, error) {
	conf, err := a.prepare()
	if err != nil {
		return nil, fmt.Errorf("resolve packages: %w", err)
	}
	stamp := filepath.Join(a.dir, "updated")
	if st, err := os.Stat(stamp); err != nil || time.Since(st.ModTime()) > a.maxAge {
		if _, err := a.aptGet(ctx, conf, "update"); err != nil {
			return nil, fmt.Errorf("resolve packages: %w", err)
		}
		if err := os.WriteFile(stamp, nil, 0o644); err != nil {
			return nil, fmt.Errorf("resolve packages: %w", err)
		}
	}
	// The answer depends only on the lists and the request: memoize it
	// until the lists are refreshed.
	st, err := os.Stat(stamp)
	if err != nil {
		return nil, fmt.Errorf("resolve packages: %w", err)
	}
	sorted := append([]string(nil), pkgs...)
	sort.Strings(sorted)
	sum := sha256.Sum256([]byte(variant + "\n" + strings.Join(sorted, "\n")))
	memo := filepath.Join(a.dir, "resolved", hex.EncodeToString(sum[:])+".json")
	var m resolveMemo
	if b, err := os.ReadFile(memo); err == nil && json.Unmarshal(b, &m) == nil && m.Lists == st.ModTime().UnixNano() && len(m.Versions) > 0 {
		return m.Versions, nil
	}
	args := append([]string{"install", "-s", "-y"}, baseSet(variant)...)
	out, err := a.aptGet(ctx, conf, append(args, pkgs...)...)
	if err != nil {
		return nil, fmt.Errorf("resolve packages: %w", err)
	}
	vers := ParseAptSimulation(string(out))
	if len(vers) == 0 {
		return nil, fmt.Errorf("resolve packages: apt-get -s installed nothing")
	}
	if b, err := json.Marshal(resolveMemo{Lists: st.ModTime().UnixNano(), Versions: vers}); err == nil {
		if os.MkdirAll(filepath.Dir(memo), 0o755) == nil {
			_ = os.WriteFile(memo, b, 0o644) // a lost memo only costs time
		}
	}
	return vers, nil
}

// resolveMemo is a resolution remembered for one state of the lists.
type resolveMemo struct {
	Lists    int64
	Versions map[string]string
}

// ParseAptSimulation reads `apt-get install -s` output ("Inst name (version
// archive [arch])") into name -> version.
func ParseAptSimulation(out string) map[string]string {
	vers := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || f[0] != "Inst" {
			continue
		}
		v := f[2]
		if strings.HasPrefix(v, "[") && len(f) > 3 { // "Inst name [oldver] (newver ...)"
			v = f[3]
		}
		vers[f[1]] = strings.TrimPrefix(v, "(")
	}
	return vers
}

// versionLines renders name=version lines, sorted.
func versionLines(vers map[string]string) string {
	lines := make([]string, 0, len(vers))
	for n, v := range vers {
		lines = append(lines, n+"="+v)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "; ")
}
