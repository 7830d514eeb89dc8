package images

import (
	"bufio"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// Package versions are resolved with the host's apt-get against a private
// apt state under the state directory (its own lists, an empty dpkg status),
// using the same sources the build uses: `apt-get install --print-uris` of the
// variant's base set plus the recipe's packages prints the full closure with
// the candidate versions, which is what mmdebstrap would install now. The
// lists are refreshed when older than Builder.ListsMaxAge.

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

// debName and debVersion are what Debian policy allows in a package name and version.
var (
	debName    = regexp.MustCompile(`^[a-z0-9][a-z0-9.+-]+$`)
	debVersion = regexp.MustCompile(`^([0-9]+:)?[0-9A-Za-z][0-9A-Za-z.+~-]*$`)
)

// ParseAptURIs reads `apt-get install --print-uris` output (lines "'URI' FILE SIZE
// HASH", the hash missing for some archives, FILE being name_version_arch.deb with
// ":" escaped as %3a) into name -> version.
func ParseAptURIs(out string) (map[string]string, error) {
	vers := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || !strings.HasPrefix(f[0], "'") || !strings.HasSuffix(f[1], ".deb") {
			continue
		}
		parts := strings.Split(strings.TrimSuffix(f[1], ".deb"), "_")
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
			return nil, fmt.Errorf("apt-get --print-uris: unexpected file name %q", f[1])
		}
		v, err := url.PathUnescape(parts[1])
		if err != nil {
			return nil, fmt.Errorf("apt-get --print-uris: file name %q: %w", f[1], err)
		}
		// Names and versions go into file names and apt-get's arguments: only what
		// Debian allows in them (no "/", no spaces) is taken.
		if !debName.MatchString(parts[0]) || !debVersion.MatchString(v) {
			return nil, fmt.Errorf("apt-get --print-uris: %q is not a Debian package name and version", f[1])
		}
		vers[parts[0]] = v
	}
	return vers, nil
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
