package images

import (
	"bufio"
	"sort"
	"strings"
)

// Package versions are resolved with the host's apt-get against a private
// apt state under the state directory (its own lists, an empty dpkg status),
// using the same sources the build uses: `apt-get install -s` of the
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
