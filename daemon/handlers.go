package daemon

import (
	"net/http"

	"github.com/osdcloud/osd/daemon/rest"
)

// endpoints is the daemon's REST API under /1.0.
func (d *Daemon) endpoints() []rest.Endpoint {
	return append(d.clusterSvc.Endpoints(),
		rest.Endpoint{Path: "", Get: rest.Action{Handler: func(*http.Request) rest.Response { return rest.SyncResponse(d.info()) }}},
		rest.Endpoint{Path: "journal", Get: rest.Action{Handler: d.getJournal}},
		rest.Endpoint{Path: "cluster/join-remote", Get: rest.Action{Handler: d.getJoinRemote}, Post: rest.Action{Handler: d.postJoinRemote}},
		rest.Endpoint{Path: "init", Get: rest.Action{Handler: d.getInit}, Post: rest.Action{Handler: d.postInit}},
		rest.Endpoint{Path: "preflight", Get: rest.Action{Handler: d.getPreflight}},
		rest.Endpoint{Path: "operations/{id}", Get: rest.Action{Handler: d.getOperation}},
		rest.Endpoint{Path: "deployment", Get: rest.Action{Handler: d.getDeployment}},
		rest.Endpoint{Path: "deployment/values/{service}", Get: rest.Action{Handler: d.getRenderedValues}},
		rest.Endpoint{Path: "images", Get: rest.Action{Handler: d.getImages}},
		rest.Endpoint{Path: "images/build", Post: rest.Action{Handler: d.postImagesBuild}},
		rest.Endpoint{Path: "images/export", Post: rest.Action{Handler: d.postImagesExport}},
		rest.Endpoint{Path: "images/import", Post: rest.Action{Handler: d.postImagesImport}},
		rest.Endpoint{Path: "instances", Get: rest.Action{Handler: d.getInstances}, Post: rest.Action{Handler: d.postInstances}},
	)
}

func (d *Daemon) getJournal(r *http.Request) rest.Response {
	entries, err := d.db.RecentJournal(r.Context(), 200)
	if err != nil {
		return rest.ErrorResponse(err)
	}
	return rest.SyncResponse(entries)
}
