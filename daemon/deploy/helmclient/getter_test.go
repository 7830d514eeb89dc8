package helmclient

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// apiServer answers discovery and an empty Secret list on loopback: enough of the Kubernetes
// API to exercise the getter and Helm's Secret release driver without a cluster.
func apiServer(t *testing.T) (*httptest.Server, *[]string) {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api":
			io.WriteString(w, `{"kind":"APIVersions","versions":["v1"]}`)
		case "/apis":
			io.WriteString(w, `{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"apps","versions":[{"groupVersion":"apps/v1","version":"v1"}],"preferredVersion":{"groupVersion":"apps/v1","version":"v1"}}]}`)
		case "/api/v1":
			io.WriteString(w, `{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"secrets","singularName":"secret","namespaced":true,"kind":"Secret","verbs":["get","list","create"]}]}`)
		case "/apis/apps/v1":
			io.WriteString(w, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"apps/v1","resources":[{"name":"deployments","singularName":"deployment","namespaced":true,"kind":"Deployment","shortNames":["deploy"],"verbs":["get","list"]}]}`)
		case "/api/v1/namespaces/openstack/secrets":
			io.WriteString(w, `{"kind":"SecretList","apiVersion":"v1","metadata":{},"items":[]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &seen
}

func TestRESTGetter(t *testing.T) {
	srv, _ := apiServer(t)
	g := &RESTGetter{Config: &rest.Config{Host: srv.URL}, Namespace: "openstack"}
	cfg, err := g.ToRESTConfig()
	if err != nil || cfg.Host != srv.URL || cfg == g.Config {
		t.Fatalf("ToRESTConfig() = %p %v, want a copy of the config", cfg, err)
	}
	ns, explicit, err := g.ToRawKubeConfigLoader().Namespace()
	if ns != "openstack" || !explicit || err != nil {
		t.Fatalf("Namespace() = %q %v %v, want openstack true", ns, explicit, err)
	}
	if ns, _, _ := (&RESTGetter{Config: cfg}).ToRawKubeConfigLoader().Namespace(); ns != "default" {
		t.Fatalf("Namespace() without one = %q, want default", ns)
	}
	m, err := g.ToRESTMapper()
	if err != nil {
		t.Fatal(err)
	}
	mapping, err := m.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "v1")
	if err != nil || mapping.Resource.Resource != "deployments" {
		t.Fatalf("RESTMapping(apps Deployment) = %+v, %v, want deployments", mapping, err)
	}
	gvk, err := m.KindFor(schema.GroupVersionResource{Resource: "deploy"})
	if err != nil || gvk.Kind != "Deployment" {
		t.Fatalf("KindFor(deploy) = %v, %v, want Deployment (short name)", gvk, err)
	}
	d1, _ := g.ToDiscoveryClient()
	d2, _ := g.ToDiscoveryClient()
	if d1 != d2 {
		t.Fatalf("ToDiscoveryClient() is not cached")
	}
}

// TestNewUsesSecretsDriver checks the real configuration path (Init with the Secret driver)
// against the loopback API server: a missing release is ErrNotFound, read from Secrets
// labelled owner=helm in the release namespace.
func TestNewUsesSecretsDriver(t *testing.T) {
	srv, seen := apiServer(t)
	c := New(&rest.Config{Host: srv.URL}, hashJSON, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if _, err := c.Get("openstack", "keystone"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(missing) error = %v, want ErrNotFound", err)
	}
	found := false
	for _, s := range *seen {
		if strings.HasPrefix(s, "GET /api/v1/namespaces/openstack/secrets?") && strings.Contains(s, "owner%3Dhelm") && strings.Contains(s, "name%3Dkeystone") {
			found = true
		}
	}
	if !found {
		t.Fatalf("requests = %v, want a Secret list in openstack selecting owner=helm,name=keystone", *seen)
	}
}
