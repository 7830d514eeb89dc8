package openstack

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// hostKey is a guest's host key as its console prints it.
const hostKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOv2n5pd0bU4Cq1y6nW3tqyA3Ahl3Zr9dIhUGl0WbW5I"

// fakeCloud answers the Keystone, Nova, Glance and Neutron calls Launch
// makes, from loopback. It is a fake because Nova and Neutron are not always
// deployed where these tests run; TestDevCloudLaunch runs the real thing.
type fakeCloud struct {
	mu      sync.Mutex
	srv     *httptest.Server
	polls   int    // GET server calls
	status  string // final server status
	fault   string
	vifType string
	console string
	// later, when set, is the console from the third console read on (a guest whose SSH
	// server starts after its metadata report, as on a loaded host).
	later      string
	reads      int
	created    map[string]any
	floatingIP map[string]any
	// fipFirst: the server's final status was first given after the floating IP was
	// requested (the server stays BUILD until then, or for 100 polls); deletedFIP is the
	// floating IP deleted.
	fipFirst   bool
	final      bool // the final status was given
	deletedFIP string
	// portGets counts the server's port listings: the first two show it unbound (Nova's
	// binding not answered yet); lastUnbound: the last listing showed it so;
	// fipBeforeBinding: the floating IP was requested while it did.
	portGets         int
	lastUnbound      bool
	fipBeforeBinding bool
	volumes          bool // the catalog has block storage (volumev3)
}

func (f *fakeCloud) handler(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	js := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(v)
	}
	p := r.Method + " " + r.URL.Path
	switch {
	case p == "POST /v3/auth/tokens":
		w.Header().Set("X-Subject-Token", "tok")
		var cat []CatalogEntry
		for _, s := range []struct{ typ, path string }{{"compute", "/compute/v2.1"}, {"image", "/image"}, {"network", "/network"}} {
			cat = append(cat, CatalogEntry{Type: s.typ, Endpoints: []Endpoint{{Interface: "public", Region: "RegionOne", URL: f.srv.URL + s.path}}})
		}
		if f.volumes {
			cat = append(cat, CatalogEntry{Type: "volumev3", Endpoints: []Endpoint{{Interface: "public", Region: "RegionOne", URL: f.srv.URL + "/volume/v3/p"}}})
		}
		js(201, map[string]any{"token": map[string]any{"expires_at": time.Now().Add(time.Hour), "project": map[string]string{"id": "p"}, "catalog": cat}})
	case p == "GET /compute/v2.1/os-keypairs":
		js(200, map[string]any{"keypairs": []map[string]Keypair{{"keypair": {Name: DefaultKeyName, PublicKey: testPublicKey}}, {"keypair": {Name: "mine"}}}})
	case p == "GET /compute/v2.1/flavors/detail":
		js(200, map[string]any{"flavors": []Flavor{{ID: "f1", Name: "m1.tiny", VCPUs: 1, RAM: 256, Disk: 1}}})
	case p == "GET /image/v2/images":
		switch name := r.URL.Query().Get("name"); name {
		case "osd-test", "cirros":
			js(200, map[string]any{"images": []Image{{ID: "i1", Name: name, Status: "active"}}})
		case "half-uploaded":
			js(200, map[string]any{"images": []Image{{ID: "i2", Name: name, Status: "queued"}}})
		default:
			js(200, map[string]any{"images": []Image{}})
		}
	case p == "GET /image/v2/images/6f0e2c1a-1b2c-4d5e-8f90-0a1b2c3d4e5f":
		js(200, Image{ID: "6f0e2c1a-1b2c-4d5e-8f90-0a1b2c3d4e5f", Name: "by-id", Status: "active"})
	case p == "GET /network/v2.0/networks":
		js(200, map[string]any{"networks": []Network{{ID: "n-t", Name: "osd-net"}, {ID: "n-ext", Name: "external", External: true}}})
	case p == "POST /compute/v2.1/servers":
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		f.created = body["server"].(map[string]any)
		js(202, map[string]any{"server": map[string]string{"id": "s1"}})
	case p == "GET /compute/v2.1/servers/s1":
		f.polls++
		st := map[string]any{"id": "s1", "name": f.created["name"], "status": "BUILD", "OS-EXT-STS:task_state": "spawning"}
		if f.polls > 1 && (f.floatingIP != nil || f.polls > 100) {
			if !f.final {
				f.final, f.fipFirst = true, f.floatingIP != nil
			}
			st["status"], st["OS-EXT-STS:task_state"], st["OS-EXT-SRV-ATTR:host"] = f.status, nil, "vm"
			if f.fault != "" {
				st["fault"] = map[string]any{"code": 500, "message": f.fault}
			}
		}
		js(200, map[string]any{"server": st})
	case p == "GET /network/v2.0/ports":
		if r.URL.Query().Get("device_id") == "r1" {
			js(200, map[string]any{"ports": []Port{{ID: "rp", DeviceOwner: "network:router_interface", FixedIPs: []FixedIP{{SubnetID: "sub-t", IPAddress: "10.20.0.1"}}}}})
			return
		}
		f.portGets++
		vif := f.vifType
		if f.portGets <= 2 {
			vif = "unbound"
		}
		f.lastUnbound = vif == "unbound"
		js(200, map[string]any{"ports": []Port{{ID: "port1", NetworkID: "n-t", Status: "ACTIVE", VIFType: vif, HostID: "vm",
			FixedIPs: []FixedIP{{SubnetID: "sub-t", IPAddress: "10.20.0.7"}}}}})
	case p == "GET /network/v2.0/floatingips":
		js(200, map[string]any{"floatingips": []FloatingIP{}})
	case p == "POST /network/v2.0/floatingips":
		var body map[string]map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		f.floatingIP = body["floatingip"]
		f.fipBeforeBinding = f.fipBeforeBinding || f.lastUnbound
		js(201, map[string]any{"floatingip": FloatingIP{ID: "fip", FloatingIPAddress: "172.24.4.150", PortID: "port1"}})
	case p == "DELETE /network/v2.0/floatingips/fip":
		f.deletedFIP = "fip"
		w.WriteHeader(204)
	case p == "POST /compute/v2.1/servers/s1/remote-consoles":
		js(200, map[string]any{"remote_console": map[string]string{"url": "http://192.0.2.2:30680/vnc_auto.html?token=x"}})
	case p == "POST /compute/v2.1/servers/s1/action":
		f.reads++
		if f.later != "" && f.reads > 2 {
			js(200, map[string]string{"output": f.later})
			return
		}
		js(200, map[string]string{"output": f.console})
	case p == "GET /network/v2.0/routers":
		js(200, map[string]any{"routers": []map[string]any{{"id": "r1", "name": "osd-router", "external_gateway_info": map[string]string{"network_id": "n-ext"}}}})
	default:
		js(404, map[string]any{"itemNotFound": map[string]any{"code": 404, "message": "fake cloud has no " + p}})
	}
}

type fakeProbe struct {
	answerAfter int // pings before the first answer; <0: never
	calls       int
	sshAfter    int    // SSH attempts refused before the first login; <0: never
	sshCalls    int    // SSH attempts
	sshLogin    string // user@ip, host key and command of the login
}

func (p *fakeProbe) Ping(context.Context, string) error {
	p.calls++
	if p.answerAfter >= 0 && p.calls > p.answerAfter {
		return nil
	}
	return errors.New("no answer")
}
func (p *fakeProbe) Route(context.Context, string) error { return nil }

func (p *fakeProbe) SSH(_ context.Context, ip, user string, _ ssh.Signer, hostKey ssh.PublicKey, command string) (string, error) {
	p.sshCalls++
	if p.sshAfter < 0 || p.sshCalls <= p.sshAfter {
		return "", errors.New("connection refused")
	}
	p.sshLogin = user + "@" + ip + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(hostKey))) + " " + command
	return "osd-test-x\n", nil
}

func TestLaunchAgainstFakeCloud(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    string
		fault     string
		vifType   string
		console   string
		later     string
		probe     *fakeProbe
		err       string
		reachable bool
		diagnosis string
		metadata  string
		ssh       string // the SSH login expected
	}{
		{name: "reachable", status: "ACTIVE", vifType: "ovs", probe: &fakeProbe{answerAfter: 1, sshAfter: 2}, reachable: true,
			console:  "osd-guest: ssh host key " + hostKey + "\nosd-guest: eth0 10.20.0.7/24 up gateway 10.20.0.1 mtu 1442\nosd-guest: metadata uuid s1\n",
			metadata: "the guest read its own uuid", ssh: "osd@172.24.4.150 " + hostKey + " hostname"},
		{name: "reachable, host key after the metadata report", status: "ACTIVE", vifType: "ovs", probe: &fakeProbe{answerAfter: 0, sshAfter: 0}, reachable: true,
			console:  "osd-guest: eth0 10.20.0.7/24 up gateway 10.20.0.1 mtu 1442\nosd-guest: metadata uuid s1\n",
			later:    "osd-guest: eth0 10.20.0.7/24 up gateway 10.20.0.1 mtu 1442\nosd-guest: metadata uuid s1\nosd-guest: ssh host key " + hostKey + "\nosd-guest: ssh server listening on port 22\n",
			metadata: "the guest read its own uuid", ssh: "osd@172.24.4.150 " + hostKey + " hostname"},
		{name: "reachable, ssh never answers", status: "ACTIVE", vifType: "ovs", probe: &fakeProbe{answerAfter: 0, sshAfter: -1}, reachable: true,
			console: "osd-guest: ssh host key " + hostKey + "\nosd-guest: metadata uuid s1\n", metadata: "the guest read its own uuid"},
		{name: "reachable, silent guest", status: "ACTIVE", vifType: "ovs", probe: &fakeProbe{answerAfter: 0}, reachable: true, metadata: "has not reported on it after 50ms"},
		{name: "no valid host", status: "ERROR", fault: "No valid host was found. There are not enough hosts available.", probe: &fakeProbe{},
			err: "server osd-test-x went to ERROR: No valid host was found. There are not enough hosts available."},
		{name: "binding failed, no lease", status: "ACTIVE", vifType: "binding_failed", probe: &fakeProbe{answerAfter: -1},
			console: "osd-guest: init started\nosd-guest: eth0 no DHCP lease yet (leasefail)\n",
			err:     "does not answer ping on 172.24.4.150", diagnosis: "port binding failed (binding:vif_type=binding_failed on host vm)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeCloud{status: tc.status, fault: tc.fault, vifType: tc.vifType, console: tc.console, later: tc.later}
			f.srv = httptest.NewServer(http.HandlerFunc(f.handler))
			defer f.srv.Close()
			ctx := context.Background()
			c, err := Authenticate(ctx, Credentials{AuthURL: f.srv.URL + "/v3", Username: "admin", Password: "x", ProjectName: "admin"})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			keyFile := filepath.Join(dir, "osd-key")
			if _, _, err := EnsureKeyFile(keyFile); err != nil {
				t.Fatal(err)
			}
			l := Launcher{Client: c, Probe: tc.probe, PingTimeout: time.Second, Poll: 10 * time.Millisecond, MetadataTimeout: 50 * time.Millisecond,
				SSHTimeout: time.Second, KeyFile: keyFile, KnownHosts: filepath.Join(dir, "known_hosts")}
			var events []string
			tg, err := l.Resolve(ctx, LaunchRequest{Name: "osd-test-x"})
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			res, err := l.Launch(ctx, tg, func(s string) { events = append(events, s) })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Launch(%s) error = %v, want %q", tc.name, err, tc.err)
				}
			} else if err != nil {
				t.Fatalf("Launch(%s) = %v; events %q", tc.name, err, events)
			}
			if f.created["flavorRef"] != "f1" || f.created["imageRef"] != "i1" || f.created["name"] != "osd-test-x" || f.created["key_name"] != DefaultKeyName {
				t.Errorf("Launch(%s) created %v, want flavor f1, image i1, name osd-test-x, keypair osd-key", tc.name, f.created)
			}
			if tc.ssh != "" {
				kh, _ := os.ReadFile(filepath.Join(dir, "known_hosts"))
				want := "ssh -i " + keyFile + " -o UserKnownHostsFile=" + filepath.Join(dir, "known_hosts") + " osd@172.24.4.150"
				if res.SSH != want || res.SSHIn == "" || tc.probe.sshLogin != tc.ssh || string(kh) != "172.24.4.150 "+hostKey+"\n" {
					t.Errorf("Launch(%s) = SSH %q after %q, login %q, known_hosts %q; want %q, a login as %q, the host key recorded", tc.name, res.SSH, res.SSHIn, tc.probe.sshLogin, kh, want, tc.ssh)
				}
			} else if res.SSHIn != "" {
				t.Errorf("Launch(%s).SSHIn = %q, want no SSH login", tc.name, res.SSHIn)
			}
			if res.Reachable != tc.reachable {
				t.Errorf("Launch(%s).Reachable = %v, want %v", tc.name, res.Reachable, tc.reachable)
			}
			if tc.reachable && (res.FixedIP != "10.20.0.7" || res.FloatingIP != "172.24.4.150" || res.ConsoleURL == "" || f.floatingIP["port_id"] != "port1" || f.floatingIP["floating_network_id"] != "n-ext") {
				t.Errorf("Launch(%s) = %+v (floating IP request %v), want 10.20.0.7, 172.24.4.150 from n-ext on port1, a console URL", tc.name, res, f.floatingIP)
			}
			// The floating IP is made while the server builds, once its port is bound (a
			// port whose binding failed gets it at ACTIVE); one made for a server that went
			// to ERROR is deleted.
			if wantFirst := tc.vifType != "binding_failed"; f.fipFirst != wantFirst {
				t.Errorf("Launch(%s): floating IP requested before the server's final status: %v, want %v (made while it builds once its port is bound)", tc.name, f.fipFirst, wantFirst)
			}
			if f.fipBeforeBinding {
				t.Errorf("Launch(%s): the floating IP was requested while the port was unbound, want it after Neutron bound the port", tc.name)
			}
			if want := map[bool]string{true: "fip", false: ""}[tc.status == "ERROR"]; f.deletedFIP != want {
				t.Errorf("Launch(%s) deleted floating IP %q, want %q", tc.name, f.deletedFIP, want)
			}
			if !strings.Contains(res.Metadata, tc.metadata) || (tc.metadata == "") != (res.Metadata == "") {
				t.Errorf("Launch(%s).Metadata = %q, want %q", tc.name, res.Metadata, tc.metadata)
			}
			if tc.diagnosis != "" {
				d := strings.Join(res.Diagnosis, "; ")
				if !strings.Contains(d, tc.diagnosis) || !strings.Contains(d, "no DHCP lease") {
					t.Errorf("Launch(%s).Diagnosis = %q, want %q and the missing lease", tc.name, d, tc.diagnosis)
				}
			}
		})
	}
}

// TestResolveRefusesWhatTheCloudLacks: every field is checked, and what the cloud does not
// have is refused before anything is created, with an error wrapping ErrBadLaunch that
// says what exists.
// launcher serves f on loopback for the test and returns a Launcher logged in to it.
func (f *fakeCloud) launcher(t *testing.T) Launcher {
	t.Helper()
	f.srv = httptest.NewServer(http.HandlerFunc(f.handler))
	t.Cleanup(f.srv.Close)
	c, err := Authenticate(context.Background(), Credentials{AuthURL: f.srv.URL + "/v3", Username: "admin", Password: "x", ProjectName: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	return Launcher{Client: c, Probe: &fakeProbe{}}
}

func TestResolveRefusesWhatTheCloudLacks(t *testing.T) {
	f := &fakeCloud{status: "ACTIVE"}
	l := f.launcher(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		req  LaunchRequest
		err  string // "" when it resolves
	}{
		{"defaults", LaunchRequest{}, ""},
		{"flavor by ID, image by ID, network by ID, own key", LaunchRequest{Flavor: "f1", Image: "6f0e2c1a-1b2c-4d5e-8f90-0a1b2c3d4e5f", Network: "n-t", Key: "mine"}, ""},
		{"unknown flavor", LaunchRequest{Flavor: "nope"}, "no flavor nope (there are: m1.tiny)"},
		{"unknown image", LaunchRequest{Image: "nope"}, "no image nope"},
		{"image not active", LaunchRequest{Image: "half-uploaded"}, "image half-uploaded is queued, not active"},
		{"unknown network", LaunchRequest{Network: "nope"}, "no network nope (tenant networks: osd-net)"},
		{"unknown keypair", LaunchRequest{Key: "nope"}, "no keypair nope (there are: osd-key, mine;"},
		{"bad name", LaunchRequest{Name: "../../etc/passwd"}, `server name "../../etc/passwd"`},
		{"name too long", LaunchRequest{Name: strings.Repeat("a", 64)}, "at most 63"},
		{"control character in the flavor", LaunchRequest{Flavor: "m1.tiny\n--debug"}, "holds the control character U+000A"},
		{"blank image", LaunchRequest{Image: "  "}, `image "  ": empty`},
		{"network not UTF-8", LaunchRequest{Network: "\xff"}, "not valid UTF-8"},
		{"huge network", LaunchRequest{Network: strings.Repeat("n", 256)}, "longer than 255 bytes"},
		{"keypair with a slash", LaunchRequest{Key: "a/b"}, `keypair "a/b"`},
		{"boot volume without block storage", LaunchRequest{VolumeGB: 1}, "this cloud has no block storage: osd status shows its storage backend"},
		{"negative boot volume", LaunchRequest{VolumeGB: -1}, "boot volume of -1 GiB: want a positive size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.created = nil
			tg, err := l.Resolve(ctx, tc.req)
			if tc.err == "" {
				if err != nil || tg.Flavor.ID == "" || tg.Image.ID == "" || tg.Network.ID == "" {
					t.Errorf("Resolve(%+v) = %+v, %v, want a flavor, an image and a network", tc.req, tg, err)
				}
				return
			}
			if !errors.Is(err, ErrBadLaunch) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Resolve(%+v) error = %v, want ErrBadLaunch saying %q", tc.req, err, tc.err)
			}
			if f.created != nil {
				t.Errorf("Resolve(%+v) created a server: %v", tc.req, f.created)
			}
		})
	}
}
