package daemon

import (
	"net/http"

	"github.com/osdcloud/osd/daemon/rest"
)

// endpoints is the daemon's REST API under /1.0.
func (d *Daemon) endpoints() []rest.Endpoint {
	return []rest.Endpoint{
		{Path: "", Get: rest.Action{Handler: func(*http.Request) rest.Response { return rest.SyncResponse(d.info()) }}},
		{Path: "journal", Get: rest.Action{Handler: d.getJournal}},
		{Path: "init", Get: rest.Action{Handler: d.getInit}, Post: rest.Action{Handler: d.postInit}},
		{Path: "preflight", Get: rest.Action{Handler: d.getPreflight}},
		{Path: "operations/{id}", Get: rest.Action{Handler: d.getOperation}},
		{Path: "deployment", Get: rest.Action{Handler: d.getDeployment}},
		{Path: "deployment/values/{service}", Get: rest.Action{Handler: d.getRenderedValues}},
		{Path: "images", Get: rest.Action{Handler: d.getImages}},
		{Path: "images/build", Post: rest.Action{Handler: d.postImagesBuild}},
		{Path: "images/export", Post: rest.Action{Handler: d.postImagesExport}},
		{Path: "images/import", Post: rest.Action{Handler: d.postImagesImport}},
	}
}

func (d *Daemon) getJournal(r *http.Request) rest.Response {
	entries, err := d.db.RecentJournal(r.Context(), 200)
	if err != nil {
		return rest.ErrorResponse(err)
	}
	return rest.SyncResponse(entries)
}
