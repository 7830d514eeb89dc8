package daemon

import (
	"net/http"

	"github.com/osdcloud/osd/daemon/cluster"
	"github.com/osdcloud/osd/daemon/rest"
)

// endpoints is the daemon's REST API under /1.0: every resource's routes.
func (d *Daemon) endpoints() []rest.Endpoint {
	eps := []rest.Endpoint{{Path: "", Get: rest.Action{Handler: func(*http.Request) rest.Response { return rest.SyncResponse(d.info()) }}}}
	for _, r := range [][]rest.Endpoint{
		d.clusterSvc.Endpoints(),
		d.st.Ops.Endpoints(),
		d.conv.Endpoints(),
		d.join.Endpoints(),
		d.deployment.Endpoints(),
		d.images.Endpoints(),
		d.launch.Endpoints(),
		d.storage.Endpoints(),
	} {
		eps = append(eps, r...)
	}
	return eps
}

// access is who may call each route of the API over HTTPS: the cluster's own routes
// (cluster.Access) and the daemon's. Every route must have an entry (a test checks it);
// one without is refused to every HTTPS caller. The unix socket is root's alone and
// answers everything. Operators (certificates trusted with osd trust add) may do
// everything; members may read the daemon's state, nothing that changes it, and fetch the
// service images their roles run (the catalog and blobs by digest).
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
		{Method: "GET", Path: "operations"}:                  {op},
		{Method: "GET", Path: "operations/{id}"}:             {op},
		{Method: "DELETE", Path: "operations/{id}"}:          {op},
		{Method: "GET", Path: "deployment"}:                  {op},
		{Method: "GET", Path: "deployment/values/{service}"}: {op},
		{Method: "GET", Path: "images"}:                      {op, member},
		{Method: "GET", Path: "images/blobs/{digest}"}:       {op, member},
		{Method: "POST", Path: "images/build"}:               {op},
		{Method: "POST", Path: "images/export"}:              {op},
		{Method: "POST", Path: "images/import"}:              {op},
		{Method: "GET", Path: "instances"}:                   {op},
		{Method: "POST", Path: "instances"}:                  {op},
		{Method: "GET", Path: "storage"}:                     {op},
	}
	for r, roles := range cluster.Access {
		t[r] = roles
	}
	return t
}
