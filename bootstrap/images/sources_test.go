package images

import (
	"reflect"
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
