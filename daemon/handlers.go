package daemon

import (
	"net/http"

	"github.com/osdcloud/osd/daemon/cluster"
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

// access is who may call each route of the API over HTTPS: the cluster's own routes
// (cluster.Access) and the daemon's. Every route must have an entry (a test checks it);
// one without is refused to every HTTPS caller. The unix socket is root's alone and
// answers everything. Operators (certificates trusted with osd trust add) may do
// everything; members may read the daemon's state, nothing that changes it.
func access() cluster.AccessTable {
	op, member := cluster.RoleOperator, cluster.RoleMember
	t := cluster.AccessTable{
		{Method: "GET", Path: ""}:                            {op, member},
		{Method: "GET", Path: "journal"}:                     {op},
		{Method: "GET", Path: "cluster/join-remote"}:         {op},
		{Method: "POST", Path: "cluster/join-remote"}:        {op},
		{Method: "GET", Path: "init"}:                        {op},
		{Method: "POST", Path: "init"}:                       {op},
		{Method: "GET", Path: "preflight"}:                   {op},
		{Method: "GET", Path: "operations/{id}"}:             {op},
		{Method: "GET", Path: "deployment"}:                  {op},
		{Method: "GET", Path: "deployment/values/{service}"}: {op},
		{Method: "GET", Path: "images"}:                      {op},
		{Method: "POST", Path: "images/build"}:               {op},
		{Method: "POST", Path: "images/export"}:              {op},
		{Method: "POST", Path: "images/import"}:              {op},
		{Method: "GET", Path: "instances"}:                   {op},
		{Method: "POST", Path: "instances"}:                  {op},
	}
	for r, roles := range cluster.Access {
		t[r] = roles
	}
	return t
}

func (d *Daemon) getJournal(r *http.Request) rest.Response {
	entries, err := d.db.RecentJournal(r.Context(), 200)
	if err != nil {
		return rest.ErrorResponse(err)
	}
	return rest.SyncResponse(entries)
}
