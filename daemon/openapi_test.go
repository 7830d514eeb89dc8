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

	"github.com/osdcloud/osd/daemon/client"
	"github.com/osdcloud/osd/daemon/cluster"
	"github.com/osdcloud/osd/daemon/rest"
)

// openAPIFile is the API's description kept in the repository.
const openAPIFile = "../api/openapi.yaml"

// routes lists "METHOD /1.0/path" for every action of endpoints, with whether it allows
// untrusted callers.
func routes(endpoints []rest.Endpoint) map[string]bool {
	out := map[string]bool{}
	for _, ep := range endpoints {
		path := rest.APIPrefix
		if p := strings.Trim(ep.Path, "/"); p != "" {
			path += "/" + p
		}
		for method, a := range map[string]rest.Action{"GET": ep.Get, "PUT": ep.Put, "POST": ep.Post, "PATCH": ep.Patch, "DELETE": ep.Delete} {
			if a.Handler != nil {
				out[method+" "+path] = a.AllowUntrusted
			}
		}
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
	d := &Daemon{clusterSvc: &cluster.Service{}}
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

// TestHTTPSRoutesNeedTrust runs a real daemon (store, CA, trust set, the full router on
// HTTPS) and calls every route but the join ones: without a client certificate 401, with
// an untrusted one 403, with a CA-signed member certificate of a node that never joined
// 403. A trusted client reaches the handlers.
func TestHTTPSRoutesNeedTrust(t *testing.T) {
	d, local := testDaemon(t, "node1")
	ctx := context.Background()
	stranger := selfSignedPair(t, "stranger")
	certPEM, keyPEM, err := cluster.IssueMemberCert(d.clusterSvc.CA, "node9")
	if err != nil {
		t.Fatal(err)
	}
	unregistered, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	https := func(cert *tls.Certificate) *client.Client {
		cfg, err := cluster.ClientTLSConfig(d.clusterSvc.CA.Fingerprint(), cert)
		if err != nil {
			t.Fatal(err)
		}
		hc := cluster.NewHTTPClient(cfg)
		t.Cleanup(hc.CloseIdleConnections)
		return client.New("https://"+d.httpsAddr, hc)
	}
	vars := strings.NewReplacer("{name}", "node2", "{fingerprint}", strings.Repeat("ab", 32), "{id}", "0123456789abcdef", "{service}", "keystone")
	checked := 0
	for route, open := range routes(d.endpoints()) {
		method, path, _ := strings.Cut(route, " ")
		path = vars.Replace(strings.TrimPrefix(path, rest.APIPrefix))
		if open {
			if !slices.Contains([]string{"POST /1.0/cluster/join", "POST /1.0/cluster/join/complete"}, route) {
				t.Errorf("%s allows untrusted callers, want only the join routes to", route)
			}
			continue
		}
		for _, who := range []struct {
			name string
			cert *tls.Certificate
			want int
		}{{"no certificate", nil, http.StatusUnauthorized}, {"untrusted", stranger, http.StatusForbidden}, {"CA-signed, not a member", &unregistered, http.StatusForbidden}} {
			err := https(who.cert).Query(ctx, method, path, map[string]string{}, nil)
			if got := statusOf(err); got != who.want {
				t.Errorf("%s %s (%s) = %v (status %d), want %d", method, path, who.name, err, got, who.want)
			}
		}
		checked++
	}
	if checked < 15 {
		t.Errorf("checked %d routes, want every protected route (at least 15)", checked)
	}
	// The same client, once trusted, gets past the authorizer.
	pemCert := encodeCertPEM(stranger)
	if err := local.Query(ctx, http.MethodPost, "trust", cluster.TrustRequest{Name: "automation", Certificate: string(pemCert)}, nil); err != nil {
		t.Fatal(err)
	}
	var info map[string]any
	if err := https(stranger).Query(ctx, http.MethodGet, "", nil, &info); err != nil || info["version"] == nil {
		t.Errorf("GET /1.0 as a trusted client = %v, %v, want the server info", info, err)
	}
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
