package images

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// AptSource is one apt repository entry.
type AptSource struct {
	URI        string
	Suite      string
	Components []string
	SignedBy   string
}

// Line renders the entry as a one-line sources.list entry.
func (s AptSource) Line() string {
	opt := ""
	if s.SignedBy != "" {
		opt = "[signed-by=" + s.SignedBy + "] "
	}
	return "deb " + opt + s.URI + " " + s.Suite + " " + strings.Join(s.Components, " ")
}

// ParseSourcesList parses one-line style sources.list content ("deb [opts]
// uri suite comp..."); deb-src and comments are ignored.
func ParseSourcesList(content string) []AptSource {
	var out []AptSource
	sc := bufio.NewScanner(strings.NewReader(content))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		var signedBy string
		if strings.HasPrefix(f[0], "[") {
			opts := []string{}
			for len(f) > 0 {
				o := f[0]
				f = f[1:]
				opts = append(opts, strings.Trim(o, "[]"))
				if strings.HasSuffix(o, "]") {
					break
				}
			}
			for _, o := range opts {
				if v, ok := strings.CutPrefix(o, "signed-by="); ok {
					signedBy = v
				}
			}
		}
		if len(f) < 2 {
			continue
		}
		out = append(out, AptSource{URI: f[0], Suite: f[1], Components: f[2:], SignedBy: signedBy})
	}
	return out
}

// ParseDeb822 parses deb822-style .sources content; one AptSource per
// (URI, suite) of each enabled "Types: deb" stanza.
func ParseDeb822(content string) []AptSource {
	var out []AptSource
	for _, stanza := range strings.Split(content, "\n\n") {
		fields := map[string]string{}
		var last string
		for _, line := range strings.Split(stanza, "\n") {
			if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
				continue
			}
			if line[0] == ' ' || line[0] == '\t' {
				if last != "" {
					fields[last] += "\n" + strings.TrimSpace(line)
				}
				continue
			}
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			last = strings.ToLower(strings.TrimSpace(k))
			fields[last] = strings.TrimSpace(v)
		}
		if !containsField(fields["types"], "deb") || strings.EqualFold(fields["enabled"], "no") {
			continue
		}
		signedBy := fields["signed-by"]
		if strings.Contains(signedBy, "\n") || strings.Contains(signedBy, "BEGIN PGP") {
			signedBy = "" // inline keys: rely on the host's keyrings
		}
		for _, uri := range strings.Fields(fields["uris"]) {
			for _, suite := range strings.Fields(fields["suites"]) {
				out = append(out, AptSource{URI: uri, Suite: suite, Components: strings.Fields(fields["components"]), SignedBy: signedBy})
			}
		}
	}
	return out
}

func containsField(list, want string) bool {
	for _, f := range strings.Fields(list) {
		if f == want {
			return true
		}
	}
	return false
}

// SelectSources keeps the entries serving suite, its -updates and its
// -security pocket (a host may list other vendors' repositories too), main
// first, deduplicated.
func SelectSources(all []AptSource, suite string) []AptSource {
	rank := map[string]int{suite: 0, suite + "-updates": 1, suite + "-security": 2}
	seen := map[string]bool{}
	var out []AptSource
	for _, s := range all {
		if _, ok := rank[s.Suite]; !ok {
			continue
		}
		key := s.URI + " " + s.Suite
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool { return rank[out[i].Suite] < rank[out[j].Suite] })
	return out
}

// HostSources reads the host's apt configuration (/etc/apt/sources.list and
// /etc/apt/sources.list.d/*.list, *.sources) and returns the entries for
// suite. Builds use the same mirror the host is configured with.
func HostSources(suite string) ([]AptSource, error) {
	var all []AptSource
	if b, err := os.ReadFile("/etc/apt/sources.list"); err == nil {
		all = append(all, ParseSourcesList(string(b))...)
	}
	lists, _ := filepath.Glob("/etc/apt/sources.list.d/*.list")
	debs, _ := filepath.Glob("/etc/apt/sources.list.d/*.sources")
	for _, p := range lists {
		if b, err := os.ReadFile(p); err == nil {
			all = append(all, ParseSourcesList(string(b))...)
		}
	}
	for _, p := range debs {
		if b, err := os.ReadFile(p); err == nil {
			all = append(all, ParseDeb822(string(b))...)
		}
	}
	sel := SelectSources(all, suite)
	if len(sel) == 0 || sel[0].Suite != suite {
		// Another Debian release than the host's: the same mirror serves it.
		sel = SelectSources(DeriveSources(all, suite), suite)
	}
	if len(sel) == 0 || sel[0].Suite != suite {
		return nil, fmt.Errorf("no apt source for suite %s in /etc/apt/sources.list(.d), and no Debian mirror there to take it from: add one (deb http://deb.debian.org/debian %s main)", suite, suite)
	}
	return sel, nil
}

// debianCodenames are the Debian releases whose mirror entries DeriveSources reuses.
var debianCodenames = []string{"buster", "bullseye", "bookworm", "trixie", "forky", "duke", "sid"}

// DeriveSources makes entries for the Debian release suite from the host's entries for
// another Debian release (pure): a Debian mirror serves every release, so each entry whose
// suite is a Debian codename C, C-updates or C-security is repeated with suite in C's
// place (the same URI, components and keyring: Debian's archive keyring holds the keys
// of the releases around the host's). Entries of other vendors are left out.
func DeriveSources(all []AptSource, suite string) []AptSource {
	var out []AptSource
	seen := map[string]bool{}
	for _, s := range all {
		for _, c := range debianCodenames {
			pocket, ok := strings.CutPrefix(s.Suite, c)
			if !ok || (pocket != "" && pocket != "-updates" && pocket != "-security") {
				continue
			}
			d := s
			d.Suite = suite + pocket
			d.Components = append([]string(nil), s.Components...)
			if key := d.URI + " " + d.Suite; !seen[key] {
				seen[key] = true
				out = append(out, d)
			}
			break
		}
	}
	return out
}
