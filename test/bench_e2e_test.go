package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/osdcloud/osd/daemon/api"
)

// BenchmarkOpenStack measures a full osd init on a fresh state dir (images from the cache
// dir when built before), by phase; a no-op re-run; the proportional memory (PSS) of the
// whole stack once idle; Keystone token issue latency over 100 requests; the first server
// (init start to ACTIVE, create to ping of its floating IP, with the openstack CLI); osd
// launch (its create to ping through the API); `openstack server list`; after
// a power cut, the daemon's start to every API answering and to the server's ping.
// It reports metrics (make bench with OSD_E2E=1). OSD_BENCH_CACHE_DIR, when set, is the
// daemon's image and package cache instead of the default one: a new directory measures
// an osd init on a machine that never built an image.
func BenchmarkOpenStack(b *testing.B) {
	requireE2E(b)
	if os.Getenv("OSD_BENCH") == "" {
		b.Skip("set OSD_BENCH=1 as well (make bench)")
	}
	hostToItself(b) // a fresh deployment of its own, not the shared cloud
	n := newNode(b)
	var extra []string
	if dir := os.Getenv("OSD_BENCH_CACHE_DIR"); dir != "" {
		_, err := os.Stat(dir)
		fmt.Printf("openstack: image cache %s (existed before: %t)\n", dir, err == nil)
		extra = append(extra, "--cache-dir", dir)
	}
	n.start(extra...)
	t0 := time.Now()
	out, err := n.osd("init", "--timeout", "60m", "--profile")
	if err != nil {
		b.Fatalf("osd init: %v\n%s", err, out)
	}
	total := time.Since(t0)
	if i := strings.Index(out, "profile ("); i >= 0 {
		fmt.Printf("openstack: osd init %s\n%s\n", total.Round(time.Second), out[i:])
	}
	var st api.InitState
	if err := n.query("init", &st); err != nil {
		b.Fatal(err)
	}
	for _, s := range st.Steps {
		b.ReportMetric(s.Took.Seconds(), "s-"+s.Step)
	}
	reportProfile(b, st.Profile)
	b.ReportMetric(total.Seconds(), "s-init-total")
	t1 := time.Now()
	out, err = n.osd("init")
	if err != nil {
		b.Fatalf("osd init (no-op): %v\n%s", err, out)
	}
	noop := time.Since(t1)
	b.ReportMetric(noop.Seconds(), "s-init-noop")
	if noop > 5*time.Second {
		fmt.Printf("openstack: the no-op osd init took %s; what it waited for:\n%s\n", noop.Round(time.Millisecond), out)
	}

	time.Sleep(30 * time.Second) // idle
	groups, file := stackPSS(n)
	table, pss := pssTable(groups)
	b.ReportMetric(float64(pss)/1024, "MiB-stack-pss")
	for g, v := range groups {
		b.ReportMetric(float64(v)/1024, "MiB-pss-"+g)
	}
	b.ReportMetric(float64(file)/1024, "MiB-stack-pss-file")
	fmt.Printf("openstack: idle PSS by part of the stack (%d MiB, of which %d MiB file-backed):\n%s", pss/1024, file/1024, table)

	p50, p99, err := tokenLatency(filepath.Join(n.stateDir, "clouds.yaml"), 100)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(p50.Milliseconds()), "ms-token-p50")
	b.ReportMetric(float64(p99.Milliseconds()), "ms-token-p99")

	// The first server: init start to ACTIVE, and boot (create) to the host's ping of its
	// floating IP.
	t2 := time.Now()
	out, err = n.openstack("server", "create", "--flavor", "m1.tiny", "--image", "osd-test", "--network", "osd-net", "--wait", "-f", "value", "-c", "id", "bench-server")
	if err != nil {
		b.Fatalf("server create: %v\n%s", err, out)
	}
	id := strings.TrimSpace(out)
	active := time.Since(t2)
	defer n.openstack("server", "delete", "--wait", id)
	fipOut, err := n.openstack("floating", "ip", "create", "external", "-f", "value", "-c", "floating_ip_address")
	if err != nil {
		b.Fatalf("floating ip create: %v\n%s", err, fipOut)
	}
	fip := strings.TrimSpace(fipOut)
	defer n.openstack("floating", "ip", "delete", fip)
	if out, err := n.openstack("server", "add", "floating", "ip", id, fip); err != nil {
		b.Fatalf("add floating ip: %v\n%s", err, out)
	}
	if _, err := waitPing(fip, 5*time.Minute); err != nil {
		b.Fatal(err)
	}
	bootToPing := time.Since(t2)
	b.ReportMetric((total + active).Seconds(), "s-init-to-first-active")
	b.ReportMetric(active.Seconds(), "s-server-active")
	b.ReportMetric(bootToPing.Seconds(), "s-server-create-to-ping")

	// osd launch: a server on osd-net with a floating IP, until it answers ping (and SSH).
	// Its own figure is create to ping through the API (no client start-up, no 5 s status
	// polling of `openstack server create --wait`): the cloud's part of the figure above.
	t3 := time.Now()
	out, err = n.osd("launch", "--format", "json", "bench-launch")
	if err != nil {
		b.Fatalf("osd launch: %v\n%s", err, out)
	}
	launch := time.Since(t3)
	defer n.openstack("server", "delete", "--wait", "bench-launch")
	b.ReportMetric(launch.Seconds(), "s-launch-to-ping")
	var launched struct {
		PingIn string `json:"ping_in"`
	}
	if i := strings.IndexByte(out, '{'); i >= 0 {
		out = out[i:]
	}
	if err := json.Unmarshal([]byte(out), &launched); err != nil {
		b.Fatalf("osd launch --format json: %v\n%s", err, out)
	}
	apiToPing, err := time.ParseDuration(launched.PingIn)
	if err != nil {
		b.Fatalf("osd launch: ping_in %q: %v", launched.PingIn, err)
	}
	b.ReportMetric(apiToPing.Seconds(), "s-launch-create-to-ping")

	// `openstack server list` as users run it (Python start-up included), 10 times.
	var cli []time.Duration
	for i := 0; i < 10; i++ {
		t := time.Now()
		if out, err := n.openstack("server", "list"); err != nil {
			b.Fatalf("server list: %v\n%s", err, out)
		}
		cli = append(cli, time.Since(t))
	}
	sort.Slice(cli, func(i, j int) bool { return cli[i] < cli[j] })
	b.ReportMetric(float64(cli[len(cli)/2].Milliseconds()), "ms-server-list-cli-p50")

	fmt.Printf("openstack: init %s, no-op %s, stack PSS %d MiB, token p50 %s p99 %s; first server ACTIVE %s after init (%s from init start), ping %s after create (openstack CLI); osd launch %s, its ping %s after create (API); openstack server list p50 %s\n",
		total.Round(time.Second), noop.Round(time.Millisecond), pss/1024, p50, p99,
		active.Round(time.Millisecond), (total + active).Round(time.Second), bootToPing.Round(time.Millisecond), launch.Round(time.Millisecond), apiToPing, cli[len(cli)/2].Round(time.Millisecond))

	// A power cut with the server running (powerCut), then only the daemon: its start to
	// every public endpoint answering with a Keystone token, and to the server's ping.
	endpoints := n.publicEndpoints(b)
	n.powerCut(b)
	t4 := time.Now()
	if err := n.startDaemon(); err != nil {
		b.Fatal(err)
	}
	apis := n.recoverAPIs(b, endpoints, 15*time.Minute)
	if _, err := waitPing(fip, 10*time.Minute); err != nil {
		b.Fatalf("the server after the power cut: %v", err)
	}
	ping := time.Since(t4)
	b.ReportMetric(apis.Seconds(), "s-powercut-to-apis")
	b.ReportMetric(ping.Seconds(), "s-powercut-to-ping")
	fmt.Printf("power cut: every API answered %s after the daemon started, the running server answered ping after %s\n",
		apis.Round(time.Second), ping.Round(time.Second))
}

// reportProfile reports every image's and release's phases as metrics
// (s-image-NAME-PHASE, s-release-NAME-PHASE), comparable run to run.
func reportProfile(b *testing.B, p *api.Profile) {
	if p == nil {
		b.Error("osd init reported no profile")
		return
	}
	for _, im := range p.Images {
		for _, ph := range im.Phases {
			b.ReportMetric(ph.Took.Seconds(), "s-image-"+im.Name+"-"+ph.Name)
		}
	}
	for _, r := range p.Releases {
		var total time.Duration
		for _, ph := range r.Phases {
			b.ReportMetric(ph.Took.Seconds(), "s-release-"+r.Name+"-"+ph.Name)
			if ph.Name != "waiting" {
				total += ph.Took
			}
		}
		if total > 0 {
			b.ReportMetric(total.Seconds(), "s-release-"+r.Name+"-helm-to-ready")
		}
	}
}

// tokenLatency issues count tokens from Keystone with the admin credentials of clouds.yaml.
func tokenLatency(cloudsPath string, count int) (p50, p99 time.Duration, err error) {
	raw, err := os.ReadFile(cloudsPath)
	if err != nil {
		return 0, 0, err
	}
	var clouds struct {
		Clouds map[string]struct {
			Auth struct {
				AuthURL  string `json:"auth_url"`
				Username string `json:"username"`
				Password string `json:"password"`
				Project  string `json:"project_name"`
			} `json:"auth"`
		} `json:"clouds"`
	}
	if err := yaml.Unmarshal(raw, &clouds); err != nil {
		return 0, 0, err
	}
	a := clouds.Clouds["osd"].Auth
	body, _ := json.Marshal(map[string]any{"auth": map[string]any{
		"identity": map[string]any{"methods": []string{"password"}, "password": map[string]any{"user": map[string]any{
			"name": a.Username, "domain": map[string]string{"name": "Default"}, "password": a.Password}}},
		"scope": map[string]any{"project": map[string]any{"name": a.Project, "domain": map[string]string{"name": "Default"}}},
	}})
	var lat []time.Duration
	c := &http.Client{Timeout: 30 * time.Second}
	for i := 0; i < count; i++ {
		t0 := time.Now()
		resp, err := c.Post(strings.TrimSuffix(a.AuthURL, "/")+"/auth/tokens", "application/json", bytes.NewReader(body))
		if err != nil {
			return 0, 0, err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return 0, 0, fmt.Errorf("token issue: %s", resp.Status)
		}
		lat = append(lat, time.Since(t0))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat[len(lat)/2], lat[len(lat)*99/100], nil
}
