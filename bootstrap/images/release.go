package images

import (
	"fmt"
	"strings"
)

// Release is an OpenStack release osd can deploy, with the Debian release whose packages
// its service images are built from. A deployment records the release it runs (the
// release is data): images, their tags and the charts' values follow it, and a newer osd
// never moves a deployment to another release by itself.
type Release struct {
	// Name is the release's lower-case codename, as image tags and the deployment record
	// spell it ("zed", "epoxy").
	Name string
	// Series is the numbered series ("2025.1"), "" for releases before numbered series.
	Series string
	// Suite is the Debian suite of the images' packages, Debian its version number.
	Suite  string
	Debian string
}

// Title is how status names the release: "2025.1 Epoxy (Debian 13's packages)".
func (r Release) Title() string {
	t := strings.ToUpper(r.Name[:1]) + r.Name[1:]
	if r.Series != "" {
		t = r.Series + " " + t
	}
	return t + " (Debian " + r.Debian + "'s packages)"
}

// releases are the releases this osd builds images for, oldest first.
var releases = []Release{
	{Name: "zed", Suite: "bookworm", Debian: "12"},
	{Name: "epoxy", Series: "2025.1", Suite: "trixie", Debian: "13"},
}

// Zed and Epoxy name the releases of the table.
const (
	Zed   = "zed"
	Epoxy = "epoxy"
)

// Releases returns the releases osd builds images for, oldest first.
func Releases() []Release { return append([]Release(nil), releases...) }

// ReleaseNamed returns the release called name (its codename or its series, any case).
func ReleaseNamed(name string) (Release, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	var known []string
	for _, r := range releases {
		if n == r.Name || (r.Series != "" && n == r.Series) {
			return r, nil
		}
		known = append(known, r.Name)
	}
	return Release{}, fmt.Errorf("unknown OpenStack release %q: osd deploys %s", name, strings.Join(known, ", "))
}

// DefaultReleaseName is the release a new deployment gets.
const DefaultReleaseName = Zed

// DefaultRelease is the release a new deployment gets.
func DefaultRelease() Release {
	r, err := ReleaseNamed(DefaultReleaseName)
	if err != nil {
		panic(err) // the table names its default
	}
	return r
}

// RecordedRelease is the release of a host whose record names recorded (pure): that one
// (an unknown name is an error naming the known ones); when the record names none, Zed
// for a host already deployed or joined (it was the only release before osd recorded
// them, and its databases must never be rolled forward by accident), else the default.
func RecordedRelease(recorded string, deployed bool) (Release, error) {
	switch {
	case recorded != "":
		return ReleaseNamed(recorded)
	case deployed:
		return ReleaseNamed(Zed)
	}
	return DefaultRelease(), nil
}

// UpgradeTarget is the release a cloud on cur could move to (pure): the default release,
// when it is newer than cur (false when cur is the default or newer, or unknown).
func UpgradeTarget(cur Release) (Release, bool) {
	def := DefaultRelease()
	ci, di := -1, -1
	for i, r := range releases {
		switch r.Name {
		case cur.Name:
			ci = i
		case def.Name:
			di = i
		}
	}
	if ci < 0 || di <= ci {
		return Release{}, false
	}
	return def, true
}
