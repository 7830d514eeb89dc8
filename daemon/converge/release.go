package converge

import (
	bimages "github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/daemon/rest"
	"github.com/osdcloud/osd/daemon/state"
	"github.com/osdcloud/osd/daemon/store"
)

// releaseFor is the OpenStack release osd init records for host record h when asked is
// what the request named ("": none) (pure): a new cloud gets the one asked for, else the
// default; a cloud already deployed keeps its own (state.ReleaseOf), and asking it for
// another is refused, since moving a cloud between releases is a release upgrade (its
// databases migrated, its services restarted in order), not something osd init does.
func releaseFor(h store.Host, asked string) (bimages.Release, error) {
	cur, err := state.ReleaseOf(h)
	if err != nil {
		return cur, rest.Errorf(rest.ErrConflict, "this host's record names %v: install the osd version that deployed it", err)
	}
	if asked == "" {
		return cur, nil
	}
	rel, err := bimages.ReleaseNamed(asked)
	if err != nil {
		return rel, rest.Errorf(rest.ErrBadRequest, "--release: %v", err)
	}
	if h.Initialized && rel.Name != cur.Name {
		return cur, rest.Errorf(rest.ErrConflict, "this cloud runs OpenStack %s: moving it to %s is a release upgrade, which osd init does not do (osd status says when one is available); osd reset and osd init --release %s deploys a new, empty cloud instead",
			cur.Title(), rel.Title(), rel.Name)
	}
	return rel, nil
}
