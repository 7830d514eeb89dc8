package openstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestJoinURL(t *testing.T) {
	for _, tc := range []struct {
		endpoint, version, path string
		query                   url.Values
		want                    string
	}{
		{"http://10.0.0.1:30696", "v2.0", "networks", nil, "http://10.0.0.1:30696/v2.0/networks"},
		{"http://10.0.0.1:30696/", "v2.0", "/networks", url.Values{"name": {"osd-net"}}, "http://10.0.0.1:30696/v2.0/networks?name=osd-net"},
		{"http://10.0.0.1:30696/v2.0", "v2.0", "networks", nil, "http://10.0.0.1:30696/v2.0/networks"},
		{"http://10.0.0.1:30774/v2.1", "v2.1", "servers/detail", url.Values{"all_tenants": {"1"}}, "http://10.0.0.1:30774/v2.1/servers/detail?all_tenants=1"},
		{"http://10.0.0.1:30774/v2.1/6e5ba5a1", "v2.1", "flavors", nil, "http://10.0.0.1:30774/v2.1/6e5ba5a1/v2.1/flavors"},
		{"http://10.0.0.1:30292", "v2", "images", url.Values{"name": {"a b"}}, "http://10.0.0.1:30292/v2/images?name=a+b"},
		{"http://h/image/v2/", "v2", "images", nil, "http://h/image/v2/images"},
	} {
		t.Run(tc.endpoint+" "+tc.path, func(t *testing.T) {
			if got := JoinURL(tc.endpoint, tc.version, tc.path, tc.query); got != tc.want {
				t.Errorf("JoinURL(%q, %q, %q) = %q, want %q", tc.endpoint, tc.version, tc.path, got, tc.want)
			}
		})
	}
}

func TestErrorMessage(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"keystone", `{"error": {"code": 401, "message": "The request you have made requires authentication.", "title": "Unauthorized"}}`, "The request you have made requires authentication."},
		{"nova", `{"itemNotFound": {"code": 404, "message": "Flavor m1.huge could not be found."}}`, "Flavor m1.huge could not be found."},
		{"nova no valid host", `{"badRequest": {"code": 400, "message": "No valid host was found. "}}`, "No valid host was found."},
		{"neutron", `{"NeutronError": {"type": "ExternalGatewayForFloatingIPNotFound", "message": "External network abc is not reachable from subnet def.", "detail": ""}}`,
			"ExternalGatewayForFloatingIPNotFound: External network abc is not reachable from subnet def."},
		{"placement", `{"errors": [{"status": 409, "title": "Conflict", "detail": "There was a conflict.\n\n inventory in use  "}]}`, "There was a conflict. inventory in use"},
		{"glance schema", `{"message": "Provided object does not match schema 'image': 'x' is not one of ['ami', 'raw']\n\nFailed validating 'enum' in schema['properties']['disk_format']:\n    {'enum': [None]}<br /><br />\n", "code": "400 Bad Request", "title": "Bad Request"}`,
			"Provided object does not match schema 'image': 'x' is not one of ['ami', 'raw']"},
		{"glance html", "<html>\n <head>\n  <title>404 Not Found</title>\n </head>\n <body>\n  <h1>404 Not Found</h1>\n  No image found with ID x<br /><br />\n </body>\n</html>", "404 Not Found 404 Not Found No image found with ID x"},
		{"glance text", "400 Bad Request\n\nInvalid mix of disk and container formats.\n\n   ", "400 Bad Request Invalid mix of disk and container formats."},
		{"plain message", `{"message": "Service Unavailable"}`, "Service Unavailable"},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ErrorMessage([]byte(tc.body)); got != tc.want {
				t.Errorf("ErrorMessage(%q) = %q, want %q", tc.body, got, tc.want)
			}
		})
	}
}

var testCatalog = []CatalogEntry{
	{Type: "identity", Endpoints: []Endpoint{{Interface: "public", Region: "RegionOne", URL: "http://h:30500/v3/"}}},
	{Type: "compute", Endpoints: []Endpoint{
		{Interface: "internal", Region: "RegionOne", URL: "http://nova-api.openstack.svc:8774/v2.1"},
		{Interface: "public", Region: "RegionTwo", URL: "http://other:30774/v2.1"},
		{Interface: "public", Region: "RegionOne", URL: "http://h:30774/v2.1"},
	}},
}

func TestFindEndpoint(t *testing.T) {
	for _, tc := range []struct{ typ, iface, region, want, err string }{
		{"compute", "public", "RegionOne", "http://h:30774/v2.1", ""},
		{"compute", "internal", "RegionOne", "http://nova-api.openstack.svc:8774/v2.1", ""},
		{"compute", "public", "RegionTwo", "http://other:30774/v2.1", ""},
		{"identity", "public", "RegionOne", "http://h:30500/v3", ""},
		{"compute", "admin", "RegionOne", "", "service compute has no admin endpoint in region RegionOne"},
		{"network", "public", "RegionOne", "", "no network service in the catalog"},
	} {
		t.Run(tc.typ+"/"+tc.iface+"/"+tc.region, func(t *testing.T) {
			got, err := FindEndpoint(testCatalog, tc.typ, tc.iface, tc.region)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("FindEndpoint(%s, %s, %s) error = %v, want %q", tc.typ, tc.iface, tc.region, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("FindEndpoint(%s, %s, %s) = %q, %v, want %q", tc.typ, tc.iface, tc.region, got, err, tc.want)
			}
		})
	}
	if _, err := FindEndpoint(testCatalog, "network", "public", ""); !errors.Is(err, ErrNoService) {
		t.Errorf("FindEndpoint(missing service) error = %v, want ErrNoService", err)
	}
}

func TestLoadCloudsYAML(t *testing.T) {
	p := filepath.Join(t.TempDir(), "clouds.yaml")
	doc := "clouds:\n  osd:\n    auth:\n      auth_url: http://10.0.0.1:30500/v3\n      password: s3cret\n      project_domain_name: Default\n      project_name: admin\n      user_domain_name: Default\n      username: admin\n    identity_api_version: 3\n    interface: public\n    region_name: RegionOne\n"
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := LoadCloudsYAML(p, "osd")
	want := Credentials{AuthURL: "http://10.0.0.1:30500/v3", Username: "admin", Password: "s3cret", ProjectName: "admin",
		UserDomainName: "Default", ProjectDomainName: "Default", Region: "RegionOne", Interface: "public"}
	if err != nil || got != want {
		t.Errorf("LoadCloudsYAML(osd) = %+v, %v, want %+v", got, err, want)
	}
	if _, err := LoadCloudsYAML(p, "other"); err == nil {
		t.Error("LoadCloudsYAML(other) = nil error, want an error")
	}
}

// TestClientAgainstFakeKeystone runs the HTTP side against a loopback server
// that answers like Keystone and Nova (a fake: the real cloud is tested in
// TestDevCloud): login, catalog, token renewal after a 401, error messages.
func TestClientAgainstFakeKeystone(t *testing.T) {
	var logins, flavorCalls atomic.Int32
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == "POST" && r.URL.Path == "/v3/auth/tokens":
			var req map[string]any
			json.NewDecoder(r.Body).Decode(&req)
			pw := req["auth"].(map[string]any)["identity"].(map[string]any)["password"].(map[string]any)["user"].(map[string]any)["password"]
			if pw != "right" {
				w.WriteHeader(401)
				w.Write([]byte(`{"error": {"code": 401, "message": "The request you have made requires authentication.", "title": "Unauthorized"}}`))
				return
			}
			n := logins.Add(1)
			w.Header().Set("X-Subject-Token", "tok"+string(rune('0'+n)))
			w.WriteHeader(201)
			json.NewEncoder(w).Encode(map[string]any{"token": map[string]any{
				"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
				"project":    map[string]any{"id": "p1"}, "user": map[string]any{"id": "u1"},
				"catalog": []CatalogEntry{{Type: "compute", Endpoints: []Endpoint{{Interface: "public", Region: "RegionOne", URL: srv.URL + "/compute/v2.1"}}}},
			}})
		case r.URL.Path == "/compute/v2.1/flavors/detail":
			if flavorCalls.Add(1) == 1 { // the first token was revoked
				w.WriteHeader(401)
				return
			}
			if r.Header.Get("X-Auth-Token") != "tok2" || r.URL.Query().Get("is_public") != "None" {
				w.WriteHeader(400)
				return
			}
			w.Write([]byte(`{"flavors": [{"id": "1", "name": "m1.tiny", "vcpus": 1, "ram": 256, "disk": 1}]}`))
		case r.URL.Path == "/compute/v2.1/servers/nope":
			w.WriteHeader(404)
			w.Write([]byte(`{"itemNotFound": {"code": 404, "message": "Instance nope could not be found."}}`))
		default:
			w.WriteHeader(500)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	if _, err := Authenticate(ctx, Credentials{AuthURL: srv.URL + "/v3", Username: "admin", Password: "wrong", ProjectName: "admin"}); err == nil || !strings.Contains(err.Error(), "requires authentication") {
		t.Errorf("Authenticate(wrong password) error = %v, want Keystone's message", err)
	}
	c, err := Authenticate(ctx, Credentials{AuthURL: srv.URL + "/v3/", Username: "admin", Password: "right", ProjectName: "admin"})
	if err != nil {
		t.Fatalf("Authenticate: %v", err)
	}
	if c.ProjectID() != "p1" {
		t.Errorf("ProjectID() = %q, want p1", c.ProjectID())
	}
	fl, err := c.ListFlavors(ctx)
	if err != nil || len(fl) != 1 || fl[0].Name != "m1.tiny" || fl[0].RAM != 256 {
		t.Errorf("ListFlavors() = %+v, %v, want m1.tiny after one token renewal", fl, err)
	}
	if logins.Load() != 2 {
		t.Errorf("logins = %d, want 2 (one renewal after the 401)", logins.Load())
	}
	_, err = c.GetServer(ctx, "nope")
	if !IsNotFound(err) || !strings.Contains(err.Error(), "Instance nope could not be found.") {
		t.Errorf("GetServer(nope) error = %v, want a 404 with Nova's message", err)
	}
	if err := c.DeleteServer(ctx, "nope"); err != nil {
		t.Errorf("DeleteServer(missing) = %v, want nil", err)
	}
	if _, err := c.ListNetworks(ctx, ""); !errors.Is(err, ErrNoService) {
		t.Errorf("ListNetworks(no network service) error = %v, want ErrNoService", err)
	}
}

// TestDisableUnmappedHost: Nova answers 404 "not mapped to any cell" to disabling the
// service of a host it has not mapped yet; that is ErrHostNotMapped, other errors are not.
func TestDisableUnmappedHost(t *testing.T) {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == "POST" && r.URL.Path == "/v3/auth/tokens":
			w.Header().Set("X-Subject-Token", "tok")
			w.WriteHeader(201)
			json.NewEncoder(w).Encode(map[string]any{"token": map[string]any{
				"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
				"project":    map[string]any{"id": "p1"}, "user": map[string]any{"id": "u1"},
				"catalog": []CatalogEntry{{Type: "compute", Endpoints: []Endpoint{{Interface: "public", Region: "RegionOne", URL: srv.URL + "/compute/v2.1"}}}},
			}})
		case r.Method == "GET" && r.URL.Path == "/compute/v2.1/os-services":
			host := r.URL.Query().Get("host")
			fmt.Fprintf(w, `{"services": [{"id": 6, "binary": "nova-compute", "host": %q, "status": "enabled", "state": "up"}]}`, host)
		case r.Method == "PUT" && r.URL.Path == "/compute/v2.1/os-services/disable-log-reason":
			var body map[string]string
			json.NewDecoder(r.Body).Decode(&body)
			switch body["host"] {
			case "new":
				w.WriteHeader(404)
				w.Write([]byte(`{"itemNotFound": {"code": 404, "message": "Host 'new' is not mapped to any cell"}}`))
			case "gone":
				w.WriteHeader(404)
				w.Write([]byte(`{"itemNotFound": {"code": 404, "message": "Compute host gone could not be found."}}`))
			default:
				w.Write([]byte(`{"service": {"status": "disabled"}}`))
			}
		default:
			w.WriteHeader(500)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	c, err := Authenticate(ctx, Credentials{AuthURL: srv.URL + "/v3", Username: "admin", Password: "x", ProjectName: "admin"})
	if err != nil {
		t.Fatalf("Authenticate: %v", err)
	}
	if changed, err := c.DisableComputeService(ctx, "new", "r"); changed || !errors.Is(err, ErrHostNotMapped) || !strings.Contains(err.Error(), "not mapped to any cell") {
		t.Errorf("DisableComputeService(unmapped) = %v, %v, want false, ErrHostNotMapped with Nova's message", changed, err)
	}
	if changed, err := c.DisableComputeService(ctx, "gone", "r"); changed || err == nil || errors.Is(err, ErrHostNotMapped) {
		t.Errorf("DisableComputeService(other 404) = %v, %v, want false and an error that is not ErrHostNotMapped", changed, err)
	}
	if changed, err := c.DisableComputeService(ctx, "mapped", "r"); !changed || err != nil {
		t.Errorf("DisableComputeService(mapped) = %v, %v, want true, nil", changed, err)
	}
}
