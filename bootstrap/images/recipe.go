package images

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
)

// Kind says how an image is made.
type Kind string

const (
	// KindDebian images are root filesystems built by mmdebstrap.
	KindDebian Kind = "debian"
	// KindPause is the hand-assembled pause program (PauseImage).
	KindPause Kind = "pause"
	// KindGo images hold one static binary built from a Go module.
	KindGo Kind = "go"
)

// User is a service account created with a fixed ID before any package is
// installed, so the IDs do not depend on install order. The primary group has
// the same name and GID.
type User struct {
	Name   string
	UID    int
	GID    int
	Home   string
	Shell  string
	Groups []string `json:",omitempty"` // supplementary groups (must exist or be in Recipe.Groups)
}

// Group is a group created with a fixed ID before any package is installed.
type Group struct {
	Name string
	GID  int
}

// GoBuild describes a static binary built from a Go module.
type GoBuild struct {
	Module  string // module path, e.g. github.com/coredns/coredns
	Version string // exact version
	Package string // package to build (defaults to Module)
	Binary  string // path of the binary inside the image
	// Xattrs are set on the binary (e.g. security.capability).
	Xattrs map[string]string `json:",omitempty"`
}

// Recipe is the data an image is built from. Everything that changes the
// image is in here; its canonical JSON is part of the cache key.
type Recipe struct {
	Name    string
	Ref     string
	Kind    Kind
	Suite   string `json:",omitempty"` // Debian suite (bookworm)
	Variant string `json:",omitempty"` // mmdebstrap variant (minbase) of an image without Base
	// Base is the Debian image this one is layered on (its layers come first; the
	// packages are installed on top of its tree). Empty: a root built by mmdebstrap.
	Base     string   `json:",omitempty"`
	Packages []string `json:",omitempty"`
	Groups   []Group  `json:",omitempty"`
	Users    []User   `json:",omitempty"`
	// Debconf lines for debconf-set-selections, set before packages install.
	Debconf []string `json:",omitempty"`
	// Files are added to the image after the packages are installed.
	Files []File `json:",omitempty"`
	// Exclude lists more paths (path.Match patterns, relative) to leave out
	// of the image besides RootfsExcludes: state that maintainer scripts
	// generate at build time but that must be made per deployment (secrets,
	// initialized databases).
	Exclude    []string `json:",omitempty"`
	Go         *GoBuild `json:",omitempty"`
	Entrypoint []string `json:",omitempty"`
	Cmd        []string `json:",omitempty"`
	Env        []string `json:",omitempty"`
	User       string   `json:",omitempty"`
	WorkingDir string   `json:",omitempty"`
}

// Hash is the sha256 of the recipe's canonical JSON (struct field order,
// sorted package list), in hex.
func (r Recipe) Hash() string {
	c := r
	c.Packages = append([]string(nil), r.Packages...)
	sort.Strings(c.Packages)
	b, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("recipe %s: %v", r.Name, err)) // plain data always marshals
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Config returns the runtime configuration of the recipe's image.
func (r Recipe) Config() ImageConfig {
	return ImageConfig{
		Entrypoint: r.Entrypoint,
		Cmd:        r.Cmd,
		Env:        r.Env,
		User:       r.User,
		WorkingDir: r.WorkingDir,
		Labels: map[string]string{
			LabelImage:  r.Name,
			LabelRecipe: r.Hash(),
		},
	}
}

// Labels set on every image osd builds.
const (
	LabelImage  = "org.osdcloud.osd.image"
	LabelRecipe = "org.osdcloud.osd.recipe"
)

// Validate checks a recipe for the mistakes that would only show up late in
// a build: missing names, duplicate or conflicting IDs, unknown groups.
func (r Recipe) Validate() error {
	if r.Name == "" || r.Ref == "" {
		return fmt.Errorf("recipe %q: name and ref are required", r.Name)
	}
	switch r.Kind {
	case KindDebian:
		if r.Suite == "" || len(r.Packages) == 0 {
			return fmt.Errorf("recipe %s: a debian image needs a suite and packages", r.Name)
		}
		if r.Base != "" && r.Variant != "" {
			return fmt.Errorf("recipe %s: a variant is for a root image; this one is layered on %s", r.Name, r.Base)
		}
		if r.Base == r.Name {
			return fmt.Errorf("recipe %s: layered on itself", r.Name)
		}
	case KindGo:
		if r.Go == nil || r.Go.Module == "" || r.Go.Version == "" || r.Go.Binary == "" {
			return fmt.Errorf("recipe %s: a go image needs module, version and binary", r.Name)
		}
		if r.Base != "" {
			return fmt.Errorf("recipe %s: only debian images are layered", r.Name)
		}
	case KindPause:
	default:
		return fmt.Errorf("recipe %s: unknown kind %q", r.Name, r.Kind)
	}
	groups := map[string]int{}
	gids := map[int]string{}
	addGroup := func(name string, gid int) error {
		if g, ok := groups[name]; ok && g != gid {
			return fmt.Errorf("recipe %s: group %s has GIDs %d and %d", r.Name, name, g, gid)
		}
		if n, ok := gids[gid]; ok && n != name {
			return fmt.Errorf("recipe %s: GID %d used by %s and %s", r.Name, gid, n, name)
		}
		groups[name], gids[gid] = gid, name
		return nil
	}
	for _, g := range r.Groups {
		if err := addGroup(g.Name, g.GID); err != nil {
			return err
		}
	}
	uids := map[int]string{}
	for _, u := range r.Users {
		if u.Name == "" || u.UID <= 0 || u.GID <= 0 {
			return fmt.Errorf("recipe %s: user %q needs a name and non-zero UID/GID", r.Name, u.Name)
		}
		if n, ok := uids[u.UID]; ok {
			return fmt.Errorf("recipe %s: UID %d used by %s and %s", r.Name, u.UID, n, u.Name)
		}
		uids[u.UID] = u.Name
		if err := addGroup(u.Name, u.GID); err != nil {
			return err
		}
	}
	for _, u := range r.Users {
		for _, g := range u.Groups {
			if _, ok := groups[g]; !ok {
				return fmt.Errorf("recipe %s: user %s: supplementary group %s is not defined in the recipe", r.Name, u.Name, g)
			}
		}
	}
	return nil
}
