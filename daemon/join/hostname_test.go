package join

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/cluster"
	"github.com/osdcloud/osd/daemon/rest"
	"github.com/osdcloud/osd/daemon/state"
	"github.com/osdcloud/osd/daemon/store"
)

// testCluster is the cluster side of these tests: its service, store, CA and address.
type testCluster struct {
	svc  *cluster.Service
	db   *store.DB
	ca   *cluster.CA
	addr string
}

// standIn is the cluster's Kubernetes and host in these tests: a host called hostname,
// node1 in listings, agent credentials counted (and not usable).
type standIn struct {
	cluster.NoHooks
	hostname string
	agents   *atomic.Int32
}

func (h standIn) Hostname() string   { return h.hostname }
func (h standIn) Local() *api.Member { return &api.Member{Name: "node1", Local: true} }

func (h standIn) AgentCredential(context.Context, string) (cluster.AgentCredential, error) {
	h.agents.Add(1)
	return cluster.AgentCredential{ServerURL: "not-a-url", Token: "fake", Expires: time.Now().Add(time.Minute)}, nil
}

// hostCluster serves the cluster's real join endpoints over TLS on 127.0.0.1 with SQLite
// in memory, on a host called hostname; its Kubernetes is a stand-in that counts the
// agent credentials it issued. older makes its first join step decode requests as
// clusters did before joiners sent hostnames.
func hostCluster(t *testing.T, hostname string, older bool) (*testCluster, *atomic.Int32) {
	t.Helper()
	dir := t.TempDir()
	ca, err := cluster.EnsureCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := cluster.EnsureServerCert(ca, dir, []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.OpenMemory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	l, err := tls.Listen("tcp", "127.0.0.1:0", cluster.ServerTLSConfig(cert))
	if err != nil {
		t.Fatal(err)
	}
	var agents atomic.Int32
	addr := l.Addr().String()
	svc := cluster.New(cluster.Config{DB: db, CA: ca, Addresses: func() []string { return []string{addr} }},
		standIn{hostname: hostname, agents: &agents})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	endpoints := svc.Endpoints()
	if older {
		for i, e := range endpoints {
			if e.Path == "cluster/join" {
				endpoints[i].Post.Handler = olderJoin(svc)
			}
		}
	}
	go func() { done <- rest.Serve(ctx, l, rest.NewRouter(endpoints)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve() = %v, want nil", err)
		}
	})
	return &testCluster{svc: svc, db: db, ca: ca, addr: addr}, &agents
}

// olderJoin is POST /1.0/cluster/join as clusters answered it before join requests had
// a hostname: the same strict decoding, of the request as it was then.
func olderJoin(svc *cluster.Service) func(*http.Request) rest.Response {
	return func(r *http.Request) rest.Response {
		var req struct {
			Name    string `json:"name"`
			Secret  string `json:"secret"`
			Address string `json:"address"`
			CSR     string `json:"csr,omitempty"`
		}
		if err := rest.DecodeJSON(r, &req, 16<<10); err != nil {
			return rest.ErrorResponse(err)
		}
		resp, err := cluster.HandleJoin(r.Context(), svc, api.JoinRequest{Name: req.Name, Secret: req.Secret, Address: req.Address, CSR: req.CSR})
		if err != nil {
			return rest.ErrorResponse(err)
		}
		return rest.SyncResponse(resp)
	}
}

// issueFor issues a join token for name on c.
func issueFor(t *testing.T, c *testCluster, name string) cluster.Token {
	t.Helper()
	tok, err := cluster.Issue(context.Background(), c.db, name, nil, time.Hour, []string{c.addr}, c.ca.Fingerprint(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// joiner is the join resource of a node called name on a host whose hostname is host's.
func joiner(t *testing.T, name string, host func() (string, error)) *Service {
	t.Helper()
	ctx := context.Background()
	db, err := store.OpenMemory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return New(&state.State{Cfg: state.Config{StateDir: t.TempDir(), NodeName: name}, DB: db, Ctx: ctx},
		Deps{Address: func() string { return "127.0.0.9:8443" }, Hostname: host})
}

// postJoin sends POST /1.0/cluster/join-remote to s's router and answers its status and
// body.
func postJoin(s *Service, body string) (int, string) {
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/1.0/cluster/join-remote", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	rest.NewRouter(s.Endpoints()).ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// TestJoinSendsHostname: a joining daemon sends its host's hostname, and the cluster's
// refusal of one the answering node has comes back as its own 409 with the fix, with
// nothing kept on either side; the same token is then accepted from a renamed host. The
// accepted join stops at a tunnel interface that does not exist, which is checked after
// the cluster's answer and before anything is kept or started.
func TestJoinSendsHostname(t *testing.T) {
	svc, agents := hostCluster(t, "vm", false)
	ctx := context.Background()
	tok := issueFor(t, svc, "node2")
	host := "VM"
	s := joiner(t, "node2", func() (string, error) { return host, nil })

	code, body := postJoin(s, `{"token":"`+tok.Encode()+`"}`)
	want := `the cluster refused the join: this host's hostname \"VM\" is also the hostname of node1 (the node answering this join)`
	if code != http.StatusConflict || !strings.Contains(body, want) || !strings.Contains(body, "hostnamectl set-hostname NAME") {
		t.Errorf("POST cluster/join-remote from host VM = %d %s, want 409 saying %s and the fix", code, body, want)
	}
	if _, err := os.Stat(s.identityDir()); err == nil {
		t.Errorf("the refused join left %s on the joining node, want nothing", s.identityDir())
	}
	if h, err := s.st.Host(ctx); err != nil || h.Join != nil || h.TunnelInterface != "" {
		t.Errorf("the refused join recorded %+v, %v on the joining node, want nothing", h, err)
	}
	if n := agents.Load(); n != 0 {
		t.Errorf("the refused join got %d agent credentials, want none", n)
	}
	if ms, err := svc.db.ListMembers(ctx); err != nil || len(ms) != 0 {
		t.Errorf("members after the refused join = %+v, %v, want none", ms, err)
	}

	host = "edge-2"
	code, body = postJoin(s, `{"token":"`+tok.Encode()+`","tunnel_interface":"osdt-none0"}`)
	if code != http.StatusBadRequest || !strings.Contains(body, `tunnel interface \"osdt-none0\"`) {
		t.Errorf("POST cluster/join-remote from host edge-2 = %d %s, want the cluster's acceptance, then 400 on the tunnel interface", code, body)
	}
	if n := agents.Load(); n != 1 {
		t.Errorf("the cluster issued %d agent credentials to the renamed host, want 1 (the same token accepted)", n)
	}
}

// TestJoinOlderCluster: a cluster from before joins sent hostnames refuses the unknown
// field; the joiner then joins as joiners of that version did (accepted, unchecked).
func TestJoinOlderCluster(t *testing.T) {
	svc, agents := hostCluster(t, "vm", true)
	tok := issueFor(t, svc, "node2")
	s := joiner(t, "node2", func() (string, error) { return "vm", nil })
	code, body := postJoin(s, `{"token":"`+tok.Encode()+`","tunnel_interface":"osdt-none0"}`)
	if code != http.StatusBadRequest || !strings.Contains(body, `tunnel interface \"osdt-none0\"`) {
		t.Errorf("POST cluster/join-remote to an older cluster = %d %s, want its acceptance, then 400 on the tunnel interface", code, body)
	}
	if n := agents.Load(); n != 1 {
		t.Errorf("the older cluster issued %d agent credentials, want 1", n)
	}
}
