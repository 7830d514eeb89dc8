package test

import (
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestDebLintian runs lintian on the .deb: every error or warning it reports must be one
// docs/install.md explains (section "Lintian"), and every tag it explains must still
// be reported, so the explanation does not outlive its reason.
func TestDebLintian(t *testing.T) {
	if testing.Short() {
		t.Skip("package test skipped in -short mode")
	}
	requireTools(t, "lintian")
	deb := artifact(t, "OSD_DEB", "deb", "deb")
	out, _ := runErr(10*time.Minute, nil, "lintian", "--tag-display-limit", "0", deb)
	reported := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([EW]): osd: (\S+)`).FindAllStringSubmatch(out, -1) {
		reported[m[1]+": "+m[2]] = true
	}
	explained := docLintianTags(t)
	for tag := range reported {
		if !explained[tag] {
			t.Errorf("lintian reports %s, which the Lintian section of docs/install.md does not explain:\n%s", tag, out)
		}
	}
	for tag := range explained {
		if !reported[tag] {
			t.Errorf("docs/install.md explains lintian's %s, which lintian no longer reports: remove it from there", tag)
		}
	}
	t.Logf("lintian: %s", strings.Join(keys(reported), ", "))
}

// docLintianTags are the tags listed in the Lintian section of docs/install.md as "- W: `tag`".
func docLintianTags(t *testing.T) map[string]bool {
	doc := readFile(t, "../docs/install.md")
	i := strings.Index(doc, "\n### Lintian\n")
	if i < 0 {
		t.Fatalf("docs/install.md has no \"### Lintian\" section")
	}
	section := doc[i+1:]
	if j := strings.Index(section[4:], "\n#"); j >= 0 {
		section = section[:j+4]
	}
	tags := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^- ([EW]): `([a-z0-9-]+)`").FindAllStringSubmatch(section, -1) {
		tags[m[1]+": "+m[2]] = true
	}
	return tags
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
