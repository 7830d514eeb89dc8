package images

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseSources(t *testing.T) {
	deb822 := `Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main contrib
Enabled: yes
`
	got := ParseDeb822(deb822)
	key := "/usr/share/keyrings/debian-archive-keyring.gpg"
	want := []AptSource{
		{URI: "http://deb.debian.org/debian", Suite: "bookworm", Components: []string{"main"}, SignedBy: key},
		{URI: "http://deb.debian.org/debian", Suite: "bookworm-updates", Components: []string{"main"}, SignedBy: key},
		{URI: "http://deb.debian.org/debian-security", Suite: "bookworm-security", Components: []string{"main", "contrib"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseDeb822() = %+v, want %+v", got, want)
	}
	list := "# comment\ndeb [arch=amd64 signed-by=/k.gpg] http://m/debian bookworm main non-free\ndeb-src http://m/debian bookworm main\ndeb https://vendor/apt cloud-sdk main\n"
	gotList := ParseSourcesList(list)
	wantList := []AptSource{
		{URI: "http://m/debian", Suite: "bookworm", Components: []string{"main", "non-free"}, SignedBy: "/k.gpg"},
		{URI: "https://vendor/apt", Suite: "cloud-sdk", Components: []string{"main"}},
	}
	if !reflect.DeepEqual(gotList, wantList) {
		t.Errorf("ParseSourcesList() = %+v, want %+v", gotList, wantList)
	}
	sel := SelectSources(append(append([]AptSource{}, want[2], want[1]), append(wantList, want[0], want[0])...), "bookworm")
	var suites []string
	for _, s := range sel {
		suites = append(suites, s.URI+" "+s.Suite)
	}
	wantSel := []string{"http://m/debian bookworm", "http://deb.debian.org/debian bookworm", "http://deb.debian.org/debian bookworm-updates", "http://deb.debian.org/debian-security bookworm-security"}
	if !reflect.DeepEqual(suites, wantSel) {
		t.Errorf("SelectSources() = %v, want %v", suites, wantSel)
	}
	if l := want[0].Line(); l != "deb [signed-by="+key+"] http://deb.debian.org/debian bookworm main" {
		t.Errorf("Line() = %q", l)
	}
}

func TestDeriveSources(t *testing.T) {
	host := []AptSource{
		{URI: "http://deb.debian.org/debian", Suite: "bookworm", Components: []string{"main"}, SignedBy: "/usr/share/keyrings/debian-archive-keyring.gpg"},
		{URI: "http://deb.debian.org/debian", Suite: "bookworm-updates", Components: []string{"main"}},
		{URI: "http://deb.debian.org/debian-security", Suite: "bookworm-security", Components: []string{"main"}},
		{URI: "http://deb.debian.org/debian", Suite: "bookworm-backports", Components: []string{"main"}},
		{URI: "https://packages.cloud.google.com/apt", Suite: "cloud-sdk-bookworm", Components: []string{"main"}},
		{URI: "https://deb.nodesource.com/node_20.x", Suite: "nodistro", Components: []string{"main"}},
		{URI: "http://mirror.example/debian", Suite: "bookworm", Components: []string{"main", "contrib"}},
	}
	got := SelectSources(DeriveSources(host, "trixie"), "trixie")
	var lines []string
	for _, s := range got {
		lines = append(lines, s.Line())
	}
	want := []string{
		"deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main",
		"deb http://mirror.example/debian trixie main contrib",
		"deb http://deb.debian.org/debian trixie-updates main",
		"deb http://deb.debian.org/debian-security trixie-security main",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("SelectSources(DeriveSources(host, trixie)) =\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if got := DeriveSources(host[4:6], "trixie"); len(got) != 0 {
		t.Errorf("DeriveSources(other vendors only) = %v, want none", got)
	}
	// The input is not changed.
	if host[0].Suite != "bookworm" || host[6].Components[1] != "contrib" {
		t.Errorf("DeriveSources changed its input: %v", host)
	}
}
