package daemon

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/osdcloud/osd/bootstrap"
	"github.com/osdcloud/osd/bootstrap/preflight"
	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/client"
	"github.com/osdcloud/osd/daemon/cluster"
	"github.com/osdcloud/osd/daemon/rest"
)

// openAPIFile is the API's description kept in the repository.
const openAPIFile = "../api/openapi.yaml"

// routes lists "METHOD /1.0/path" for every action of endpoints, with whether the access
// table lets callers without a trusted certificate in.
func routes(endpoints []rest.Endpoint) map[string]bool {
	out := map[string]bool{}
	table := access()
	for _, r := range rest.Routes(endpoints) {
		out[r.String()] = table.Allows(r, cluster.RoleAnyone)
	}
	return out
}

// TestOpenAPIMatchesRoutes compares the OpenAPI document with the routes the daemon
// registers (the same on the unix socket and HTTPS), both ways, and checks that exactly
// the routes open to untrusted callers are marked without security.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	b, err := os.ReadFile(openAPIFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI    string                    `json:"openapi"`
		Paths      map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas   map[string]any `json:"schemas"`
			Responses map[string]any `json:"responses"`
		} `json:"components"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("parse %s: %v", openAPIFile, err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Errorf("openapi = %q, want 3.x", doc.OpenAPI)
	}
	d := unstarted(t)
	registered := routes(d.endpoints())
	documented := map[string]bool{}
	opIDs := map[string]string{}
	for path, item := range doc.Paths {
		for method, v := range item {
			if method == "parameters" {
				continue
			}
			op, ok := v.(map[string]any)
			if !ok {
				t.Errorf("%s %s is not an operation object", method, path)
				continue
			}
			key := strings.ToUpper(method) + " " + path
			sec, hasSec := op["security"]
			documented[key] = hasSec && len(sec.([]any)) == 1 && len(sec.([]any)[0].(map[string]any)) == 0
			id, _ := op["operationId"].(string)
			if id == "" {
				t.Errorf("%s has no operationId", key)
			} else if other, dup := opIDs[id]; dup {
				t.Errorf("operationId %s used by %s and %s", id, other, key)
			}
			opIDs[id] = key
			for _, v := range regexp.MustCompile(`\{([a-z]+)\}`).FindAllStringSubmatch(path, -1) {
				if !strings.Contains(string(mustJSON(t, item["parameters"]))+string(mustJSON(t, op["parameters"])), `"name":"`+v[1]+`"`) {
					t.Errorf("%s does not describe its path parameter %s", key, v[1])
				}
			}
		}
	}
	var missingDoc, missingRoute []string
	for r, open := range registered {
		docOpen, ok := documented[r]
		if !ok {
			missingDoc = append(missingDoc, r)
		} else if docOpen != open {
			t.Errorf("%s: untrusted callers allowed = %v, the document says %v", r, open, docOpen)
		}
	}
	for r := range documented {
		if _, ok := registered[r]; !ok {
			missingRoute = append(missingRoute, r)
		}
	}
	sort.Strings(missingDoc)
	sort.Strings(missingRoute)
	if len(missingDoc) > 0 {
		t.Errorf("routes the daemon registers but %s does not describe: %v", openAPIFile, missingDoc)
	}
	if len(missingRoute) > 0 {
		t.Errorf("routes %s describes but the daemon does not register: %v", openAPIFile, missingRoute)
	}
	for _, m := range regexp.MustCompile(`#/components/(schemas|responses)/([A-Za-z]+)`).FindAllStringSubmatch(string(b), -1) {
		set := doc.Components.Schemas
		if m[1] == "responses" {
			set = doc.Components.Responses
		}
		if _, ok := set[m[2]]; !ok {
			t.Errorf("reference %s does not resolve", m[0])
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestAccessTableCoversEveryRoute: every route the daemon registers has a rule in the
// access table, and a route added without one is caught.
func TestAccessTableCoversEveryRoute(t *testing.T) {
	d := unstarted(t)
	eps := d.endpoints()
	if missing := access().Missing(rest.Routes(eps)); len(missing) > 0 {
		t.Errorf("routes without an access rule: %v (add them to access() in handlers.go)", missing)
	}
	withNew := append(eps, rest.Endpoint{Path: "backups", Post: rest.Action{Handler: func(*http.Request) rest.Response { return nil }}})
	if missing := access().Missing(rest.Routes(withNew)); len(missing) != 1 || missing[0].String() != "POST /1.0/backups" {
		t.Errorf("Missing(routes with a new one) = %v, want POST /1.0/backups", missing)
	}
}

// TestHTTPSRoutesByRole runs a real daemon (store, CA, trust set, the full router on
// HTTPS) and calls every route as every role that may not call it: without a client
// certificate 401; with an untrusted one, a CA-signed member certificate of a node that
// never joined, a removed member's or a member's where only operators may, 403. Routes a
// role may call are not called here (their handlers act: init, image builds); the route
// table is checked role by role against stub handlers in the cluster package.
func TestHTTPSRoutesByRole(t *testing.T) {
	d, local := testDaemon(t, "node1", fakeKubernetes)
	ca := clusterCA(t, d)
	ctx := context.Background()
	stranger := selfSignedPair(t, "stranger")
	k, _ := cluster.NewMemberKey("node9")
	certPEM, err := cluster.IssueMemberCert(ca, "node9", &k.Key.PublicKey, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	unregistered := keyPair(t, certPEM, k)
	member, _ := joinAs(t, issue(t, local, "node2"))
	removed, _ := joinAs(t, issue(t, local, "node3"))
	if err := d.clusterSvc.RemoveMember(ctx, "node3"); err != nil {
		t.Fatal(err)
	}
	operator := selfSignedPair(t, "automation")
	if err := local.Query(ctx, http.MethodPost, "trust", api.TrustRequest{Name: "automation", Certificate: string(encodeCertPEM(operator))}, nil); err != nil {
		t.Fatal(err)
	}
	// One connection a request, closed after it: anonymous callers may hold only a few
	// connections at once (the listener guard).
	https := func(cert *tls.Certificate) *client.Client {
		cfg, err := cluster.ClientTLSConfigFor(ca.Fingerprint(), d.httpsAddr, cert)
		if err != nil {
			t.Fatal(err)
		}
		return client.New("https://"+d.httpsAddr, &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}})
	}
	callers := []struct {
		name string
		role cluster.Role
		cert *tls.Certificate
	}{
		{"no certificate", cluster.RoleAnyone, nil},
		{"untrusted", cluster.RoleAnyone, stranger},
		{"CA-signed, not a member", cluster.RoleAnyone, unregistered},
		{"removed member", cluster.RoleRemoved, &removed.Cert},
		{"member", cluster.RoleMember, &member.Cert},
		{"operator", cluster.RoleOperator, operator},
	}
	vars := strings.NewReplacer("{name}", "node2", "{fingerprint}", strings.Repeat("ab", 32), "{id}", "0123456789abcdef", "{service}", "keystone")
	table := access()
	refused := 0
	for _, route := range rest.Routes(d.endpoints()) {
		path := vars.Replace(route.Path)
		for _, c := range callers {
			if table.Allows(route, c.role) {
				continue
			}
			err := https(c.cert).Query(ctx, route.Method, path, map[string]string{}, nil)
			want := http.StatusForbidden
			if c.cert == nil {
				want = http.StatusUnauthorized
			}
			if got := statusOf(err); got != want {
				t.Errorf("%s as %s = %v (status %d), want %d", route, c.name, err, got, want)
			}
			refused++
		}
	}
	if refused < 60 {
		t.Errorf("checked %d refusals, want every route for every role it excludes (at least 60)", refused)
	}
	// What a member must not do: trust, tokens, members removal, init, instances.
	for _, r := range []string{"POST trust", "POST cluster/tokens", "DELETE cluster/members/{name}", "POST init", "POST instances", "GET instances", "POST images/import"} {
		method, path, _ := strings.Cut(r, " ")
		if table.Allows(rest.Route{Method: method, Path: path}, cluster.RoleMember) {
			t.Errorf("members may call %s, want operators only", r)
		}
	}
	// Allowed callers get through.
	var info map[string]any
	for _, c := range []*tls.Certificate{operator, &member.Cert} {
		if err := https(c).Query(ctx, http.MethodGet, "", nil, &info); err != nil || info["version"] == nil {
			t.Errorf("GET /1.0 = %v, %v, want the server info", info, err)
		}
	}
}

func keyPair(t *testing.T, certPEM []byte, k *cluster.MemberKey) *tls.Certificate {
	t.Helper()
	kd, err := x509.MarshalECPrivateKey(k.Key)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, pemEncode("EC PRIVATE KEY", kd))
	if err != nil {
		t.Fatal(err)
	}
	return &pair
}

func selfSignedPair(t *testing.T, cn string) *tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

func encodeCertPEM(c *tls.Certificate) []byte {
	return pemEncode("CERTIFICATE", c.Certificate[0])
}

func pemEncode(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// unstarted is a daemon wired but not running: enough to list its routes.
func unstarted(t *testing.T) *Daemon {
	t.Helper()
	d, err := New(Config{StateDir: t.TempDir(), RunDir: t.TempDir(), NodeName: "node1", Self: "/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	d.wire(context.Background(), nil)
	d.clusterSvc = cluster.New(cluster.Config{}, cluster.NoHooks{})
	return d
}

// TestConvergePlan: the whole converge plan, as the daemon wires it, is valid, and what
// fails at boot holds up only what needs it: Kubernetes and the cloud do not need
// libvirt, Open vSwitch or the volume group.
func TestConvergePlan(t *testing.T) {
	d := unstarted(t)
	steps := d.conv.Plan(preflight.Decisions{StorageBackend: "none"}, true, func(string) {})
	if err := bootstrap.Validate(steps); err != nil {
		t.Fatal(err)
	}
	needs := map[string][]string{}
	for _, s := range steps {
		needs[s.Name] = s.Needs
	}
	var all func(string, map[string]bool) map[string]bool
	all = func(n string, seen map[string]bool) map[string]bool {
		for _, x := range needs[n] {
			if !seen[x] {
				seen[x] = true
				all(x, seen)
			}
		}
		return seen
	}
	for _, s := range []string{"kubernetes", "kubernetes-node", "node-roles", "images", "openstack"} {
		for _, host := range []string{"libvirt", "openvswitch", "volume-group", "kvm-permissions", "external-network"} {
			if all(s, map[string]bool{})[host] {
				t.Errorf("%s needs %s: a failing %s would hold it up", s, host, host)
			}
		}
	}
	if !slices.Contains(needs["kubernetes"], "firewall") {
		t.Errorf("kubernetes needs %v, want the host firewall first", needs["kubernetes"])
	}
	if !all("day-one", map[string]bool{})["external-network"] || !all("day-one", map[string]bool{})["openstack"] {
		t.Errorf("day-one needs %v, want openstack and the external network", needs["day-one"])
	}
}
