package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/osdcloud/osd/daemon/client"
	"github.com/osdcloud/osd/daemon/rest"
)

// TestValuesPathStaysInItsRoute sends valuesPath(name) through the daemon's router (the
// real rest.NewRouter and client; the handlers only report what reached them): whatever
// the name holds, it arrives whole as {service} of GET /1.0/deployment/values/{service}
// (where the daemon answers 404 for a name not in the catalog), never at another
// endpoint. Unescaped, "../images" was answered by GET /1.0/images.
func TestValuesPathStaysInItsRoute(t *testing.T) {
	report := func(route string) rest.Action {
		return rest.Action{Handler: func(r *http.Request) rest.Response {
			return rest.SyncResponse(map[string]string{"route": route, "service": rest.Var(r, "service")})
		}}
	}
	srv := httptest.NewServer(rest.NewRouter([]rest.Endpoint{
		{Path: "", Get: report("root")},
		{Path: "images", Get: report("images")},
		{Path: "deployment", Get: report("deployment")},
		{Path: "deployment/values/{service}", Get: report("values")},
	}))
	defer srv.Close()
	c := client.New(srv.URL, srv.Client())
	for _, name := range []string{"keystone", "../images", "../../../1.0", "..", ".", "...", "a?b=c", "a#b", "x/y", "%2e%2e", "a b", "ü"} {
		var got map[string]string
		err := c.Query(context.Background(), http.MethodGet, valuesPath(name), nil, &got)
		if err != nil || got["route"] != "values" || got["service"] != name {
			t.Errorf("GET %s = %v, %v; want the values route with service %q", valuesPath(name), got, err, name)
		}
	}
}
