package test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/api"
)

// ovnTables are the OVN northbound tables Neutron writes for networks, ports, routers,
// floating IPs and security groups: after the test deletes what it made, each has as many
// rows as before.
var ovnTables = []string{"Logical_Switch", "Logical_Switch_Port", "Logical_Router", "Logical_Router_Port", "NAT", "ACL", "Port_Group", "DHCP_Options", "Address_Set"}

// ovnCounts counts the rows of ovnTables in the running OVN northbound database.
func (n *node) ovnCounts(t *testing.T) map[string]int {
	t.Helper()
	counts, err := n.ovnCountsErr()
	if err != nil {
		t.Fatal(err)
	}
	return counts
}

// waitPing pings addr from the host until it answers or timeout passes.
func waitPing(addr string, timeout time.Duration) (time.Duration, error) {
	t0 := time.Now()
	for time.Since(t0) < timeout {
		if exec.Command("ping", "-c1", "-W1", addr).Run() == nil {
			return time.Since(t0), nil
		}
		time.Sleep(time.Second)
	}
	return 0, fmt.Errorf("%s did not answer ping within %s", addr, timeout)
}

// field returns one field of `openstack ... show -f value -c NAME`.
func (n *node) field(t *testing.T, args ...string) string {
	t.Helper()
	out, err := n.openstack(args...)
	if err != nil {
		t.Fatalf("openstack %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(out)
}

// fixedIPRE finds the server's address on osd-net in `server show -c addresses` (printed
// as osd-net=10.20.0.5 or {'osd-net': ['10.20.0.5']} depending on the client's version).
var fixedIPRE = regexp.MustCompile(`osd-net\W+([0-9]+\.[0-9]+\.[0-9]+\.[0-9]+)`)

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// checkServer: a server through Debian's openstack client reaches ACTIVE, gets its
// address from OVN's DHCP and its uuid from the metadata service (both read from its
// console), its noVNC console answers through nova-novncproxy, and its floating IP
// answers the host's ping.
func checkServer(t *testing.T, n *node) {
	onHost := func(args ...string) *exec.Cmd { return exec.Command(args[0], args[1:]...) }
	remade := brIntRemade(t, onHost)
	t0 := time.Now()
	out, err := n.openstack("server", "create", "--flavor", "m1.tiny", "--image", "osd-test", "--network", "osd-net", "--wait", "-f", "value", "-c", "id", "e2e-server")
	id := strings.TrimSpace(out)
	if err != nil || !uuidRE.MatchString(id) {
		fault, _ := n.openstack("server", "show", "e2e-server", "-f", "value", "-c", "status", "-c", "fault")
		n.openstack("server", "delete", "--wait", "e2e-server")
		t.Fatalf("server create: %v\n%s\nserver: %s", err, out, fault)
	}
	active := time.Since(t0)
	defer n.openstack("server", "delete", "--wait", id)
	if st := n.field(t, "server", "show", id, "-f", "value", "-c", "status"); st != "ACTIVE" {
		t.Fatalf("server status = %s, want ACTIVE", st)
	}
	m := fixedIPRE.FindStringSubmatch(n.field(t, "server", "show", id, "-f", "value", "-c", "addresses"))
	if m == nil {
		t.Fatalf("server has no address on osd-net")
	}
	fixed := m[1]
	// The guest prints the address its DHCP client got (OVN answers DHCP itself).
	var console string
	lease := "osd-guest: eth0 " + fixed + "/"
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(3 * time.Second) {
		console, _ = n.openstack("console", "log", "show", id)
		if strings.Contains(console, lease) {
			break
		}
	}
	if !strings.Contains(console, lease) {
		t.Fatalf("console log lacks %q (no DHCP lease from OVN):\n%s", lease, tail(console, 30))
	}
	checkPlugKeptBrInt(t, n, onHost, id, remade)
	// Then it reads its own uuid from the metadata service (OVN metadata agent,
	// haproxy in the ovnmeta namespace, Nova's metadata API).
	metadata := "osd-guest: metadata uuid " + id
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline) && !strings.Contains(console, metadata) && !strings.Contains(console, "osd-guest: metadata unreachable"); time.Sleep(3 * time.Second) {
		console, _ = n.openstack("console", "log", "show", id)
	}
	if !strings.Contains(console, metadata) {
		t.Errorf("console log lacks %q (the guest did not get its uuid from http://169.254.169.254):\n%s", metadata, tail(console, 30))
	}
	t.Run("noVNC console", func(t *testing.T) { checkNoVNC(t, n, id) })
	fip := n.field(t, "floating", "ip", "create", "external", "-f", "value", "-c", "floating_ip_address")
	defer n.openstack("floating", "ip", "delete", fip)
	if out, err := n.openstack("server", "add", "floating", "ip", id, fip); err != nil {
		t.Fatalf("add floating ip: %v\n%s", err, out)
	}
	took, err := waitPing(fip, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("server ACTIVE after %s, lease %s, floating IP %s answered ping %s after association", active.Round(time.Millisecond), fixed, fip, took.Round(time.Millisecond))
}

// checkLaunch: osd launch boots a server that answers ping on its floating IP, reads its
// uuid from the metadata service and takes osd's key; the ssh command it prints logs in
// from the host through the floating IP and runs a command. Bad launch input is refused
// with 400 before anything is created.
func checkLaunch(t *testing.T, n *node) {
	t.Run("bad input refused before any work", func(t *testing.T) { checkLaunchRefusals(t, n) })
	t0 := time.Now()
	out, err := n.osd("launch", "e2e-launch")
	defer n.openstack("server", "delete", "--wait", "e2e-launch")
	if err != nil {
		t.Fatalf("osd launch: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`floating IP\s+([0-9.]+)`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "ping after") {
		t.Fatalf("osd launch output lacks a floating IP that answered ping:\n%s", out)
	}
	// osd launch made the floating IP; it goes with the test (the server's deletion frees it).
	t.Cleanup(func() { n.openstack("floating", "ip", "delete", m[1]) })
	if !strings.Contains(out, "the guest read its own uuid from http://169.254.169.254") {
		t.Errorf("osd launch output does not say the guest read its uuid from the metadata service:\n%s", out)
	}
	if _, err := waitPing(m[1], 10*time.Second); err != nil {
		t.Fatalf("after osd launch: %v", err)
	}
	t.Logf("osd launch:\n%s", out)
	// Where the time went: Nova's create (with the build on the host, from Nova's events),
	// the guest's boot (from its uptime on the console), ACTIVE to the first ping.
	for _, phase := range []string{"create to ACTIVE", "Nova: build on the host", "guest: kernel to /init", "guest: /init to its DHCP lease", "ACTIVE to the first ping"} {
		if !regexp.MustCompile(regexp.QuoteMeta(phase) + `[^:]*: [0-9]+\.[0-9] s`).MatchString(out) {
			t.Errorf("osd launch's time spent lacks %q:\n%s", phase, out)
		}
	}
	keyFile := filepath.Join(n.stateDir, "osd-key")
	if st, err := os.Stat(keyFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("osd's private key %s: %v, %v, want mode 0600", keyFile, st, err)
	}
	cmd := regexp.MustCompile(`(?m)^ssh\s+(ssh -i \S+ -o UserKnownHostsFile=\S+ osd@` + regexp.QuoteMeta(m[1]) + `)$`).FindStringSubmatch(out)
	if cmd == nil || !strings.Contains(cmd[1], keyFile) {
		t.Fatalf("osd launch output lacks the ssh command with %s for osd@%s:\n%s", keyFile, m[1], out)
	}
	// The printed command as a user runs it (BatchMode: a prompt would be a failure).
	args := append([]string{"-o", "BatchMode=yes", "-o", "ConnectTimeout=10"}, strings.Fields(cmd[1])[1:]...)
	var login string
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(3 * time.Second) {
		b, err := exec.Command("ssh", append(args, "hostname; id -un; cut -d' ' -f1 /proc/uptime")...).CombinedOutput()
		login = string(b)
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if f := strings.Fields(login); len(f) < 3 || f[0] != "e2e-launch" || f[1] != "osd" {
		t.Fatalf("%s = %q, want the hostname e2e-launch, user osd, the uptime", cmd[1], login)
	}
	t.Logf("ssh into the launched server as osd: logged in %s after osd launch started (guest uptime %s s)", time.Since(t0).Round(100*time.Millisecond), strings.Fields(login)[2])
}

// checkLaunchRefusals: a flavor, image, network or keypair the cloud lacks, or a bad
// name, is answered 400 with what is wrong, and no server is made.
func checkLaunchRefusals(t *testing.T, n *node) {
	for _, tc := range []struct {
		body, want string
	}{
		{`{"name": "e2e-refused", "flavor": "nope"}`, "no flavor nope"},
		{`{"name": "e2e-refused", "image": "nope"}`, "no image nope"},
		{`{"name": "e2e-refused", "network": "nope"}`, "no network nope"},
		{`{"name": "e2e-refused", "key": "nope"}`, "no keypair nope"},
		{`{"name": "../e2e-refused"}`, "server name"},
		{`{"name": "e2e-refused", "flavor": "m1.tiny\u0000"}`, "control character"},
	} {
		resp, err := n.httpClient().Post("http://osd/1.0/instances", "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		var env api.Response
		json.NewDecoder(resp.Body).Decode(&env)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || env.Type != api.ErrorResponse || !strings.Contains(env.Error, tc.want) {
			t.Errorf("POST /1.0/instances %s = %d %q, want 400 saying %q", tc.body, resp.StatusCode, env.Error, tc.want)
		}
	}
	out, err := n.osd("launch", "--flavor", "nope", "e2e-refused")
	if err == nil || !strings.Contains(out, "no flavor nope") || strings.Contains(out, "created") {
		t.Errorf("osd launch --flavor nope = %q, %v, want a refusal naming the flavor before any server is created", out, err)
	}
	if out := n.field(t, "server", "list", "--name", "e2e-refused", "-f", "value", "-c", "ID"); out != "" {
		t.Errorf("servers named e2e-refused after the refusals: %s", out)
	}
}

// checkHeat: a Heat stack with one server reaches CREATE_COMPLETE and is deleted.
func checkHeat(t *testing.T, n *node) {
	tmpl := filepath.Join(t.TempDir(), "stack.yaml")
	os.WriteFile(tmpl, []byte(`heat_template_version: 2018-08-31
description: one test server
resources:
  server:
    type: OS::Nova::Server
    properties:
      image: osd-test
      flavor: m1.tiny
      networks: [{network: osd-net}]
outputs:
  address:
    value: {get_attr: [server, first_address]}
`), 0o644)
	t0 := time.Now()
	out, err := n.openstack("stack", "create", "--wait", "-t", tmpl, "e2e-stack")
	defer func() {
		if out, err := n.openstack("stack", "delete", "--yes", "--wait", "e2e-stack"); err != nil {
			t.Errorf("stack delete: %v\n%s", err, out)
		}
	}()
	if err != nil {
		t.Fatalf("stack create: %v\n%s", err, out)
	}
	if st := n.field(t, "stack", "show", "e2e-stack", "-f", "value", "-c", "stack_status"); st != "CREATE_COMPLETE" {
		reason, _ := n.openstack("stack", "show", "e2e-stack", "-f", "value", "-c", "stack_status_reason")
		t.Fatalf("stack status = %s (%s), want CREATE_COMPLETE", st, reason)
	}
	t.Logf("stack CREATE_COMPLETE after %s", time.Since(t0).Round(time.Millisecond))
}

// checkHorizonInstance: after logging in to Horizon as admin in headless Chromium, the
// instance list shows a server the test made (screenshots in $OSD_ARTIFACTS, default a
// temporary dir).
func checkHorizonInstance(t *testing.T, n *node) {
	artifacts := os.Getenv("OSD_ARTIFACTS")
	if artifacts == "" {
		artifacts = t.TempDir()
	}
	out, err := n.openstack("server", "create", "--flavor", "m1.tiny", "--image", "osd-test", "--network", "osd-net", "--wait", "-f", "value", "-c", "id", "e2e-horizon")
	if err != nil {
		t.Fatalf("server create: %v\n%s", err, out)
	}
	defer n.openstack("server", "delete", "--wait", strings.TrimSpace(out))
	user, pass := n.adminCredentials(t)
	checkHorizon(t, "http://127.0.0.1:30080", user, pass, "e2e-horizon", artifacts)
	t.Logf("screenshots in %s", artifacts)
}

// auditLeftovers runs after every check group: it makes and deletes network objects of
// its own, then checks that the OVN northbound tables have as many rows as right after
// the deployment, and that no server, floating IP, stack or libvirt domain is left: each
// group deletes what it made, and deleting leaves nothing in Nova, Neutron or OVN.
func auditLeftovers(t *testing.T, n *node) {
	shared.mu.Lock()
	before := shared.baseline
	shared.mu.Unlock()
	// The test's own network objects, made and deleted here, as well as everything above.
	net := n.field(t, "network", "create", "-f", "value", "-c", "id", "e2e-net")
	n.field(t, "subnet", "create", "--network", net, "--subnet-range", "10.77.0.0/24", "-f", "value", "-c", "id", "e2e-subnet")
	router := n.field(t, "router", "create", "-f", "value", "-c", "id", "e2e-router")
	n.field(t, "router", "add", "subnet", router, "e2e-subnet")
	n.field(t, "router", "set", "--external-gateway", "external", router)
	port := n.field(t, "port", "create", "--network", net, "-f", "value", "-c", "id", "e2e-port")
	sg := n.field(t, "security", "group", "create", "-f", "value", "-c", "id", "e2e-sg")
	n.field(t, "security", "group", "rule", "create", "--protocol", "icmp", sg)
	for _, args := range [][]string{
		{"port", "delete", port}, {"security", "group", "delete", sg},
		{"router", "unset", "--external-gateway", router}, {"router", "remove", "subnet", router, "e2e-subnet"},
		{"router", "delete", router}, {"subnet", "delete", "e2e-subnet"}, {"network", "delete", net},
	} {
		n.field(t, args...)
	}
	// Servers are deleted by the subtests above (--wait); give OVN a moment to settle.
	var after map[string]int
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(2 * time.Second) {
		after = n.ovnCounts(t)
		if fmt.Sprint(after) == fmt.Sprint(before) || time.Now().After(deadline) {
			break
		}
	}
	if fmt.Sprint(after) != fmt.Sprint(before) {
		sgs, _ := n.openstack("security", "group", "list", "--all-projects", "-f", "value", "-c", "ID", "-c", "Name", "-c", "Project")
		t.Errorf("OVN northbound rows after deleting everything = %v, want as before %v; security groups:\n%s", after, before, sgs)
	}
	if out := n.field(t, "server", "list", "-f", "value", "-c", "Name"); out != "" {
		t.Errorf("servers left: %s", out)
	}
	if out := n.field(t, "floating", "ip", "list", "-f", "value", "-c", "ID"); out != "" {
		t.Errorf("floating IPs left: %s", out)
	}
	if out := n.field(t, "stack", "list", "-f", "value", "-c", "Stack Name"); out != "" {
		t.Errorf("stacks left: %s", out)
	}
	if out := n.field(t, "network", "trunk", "list", "-f", "value", "-c", "Name"); out != "" {
		t.Errorf("trunks left: %s", out)
	}
	for _, name := range strings.Fields(n.field(t, "image", "list", "-f", "value", "-c", "Name")) {
		if !strings.HasPrefix(name, "osd-test") {
			t.Errorf("image left: %s", name)
		}
	}
	for _, name := range strings.Fields(n.field(t, "flavor", "list", "--all", "-f", "value", "-c", "Name")) {
		if !strings.HasPrefix(name, "m1.") {
			t.Errorf("flavor left: %s", name)
		}
	}
	if out, err := exec.Command("virsh", "-c", "qemu:///system", "list", "--all", "--name").Output(); err == nil && strings.Contains(string(out), "instance-") {
		t.Errorf("libvirt domains left on the host:\n%s", out)
	}
}

// adminCredentials reads the admin user and password from the admin-openrc osd wrote.
func (n *node) adminCredentials(t *testing.T) (user, pass string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(n.stateDir, "admin-openrc"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimPrefix(strings.TrimSpace(l), "export ")
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			continue
		}
		v = strings.Trim(v, `'"`)
		switch k {
		case "OS_USERNAME":
			user = v
		case "OS_PASSWORD":
			pass = v
		}
	}
	if user == "" || pass == "" {
		t.Fatal("admin-openrc has no OS_USERNAME/OS_PASSWORD")
	}
	return user, pass
}

// ovsLog is where ovs-vswitchd logs on a Debian host (each test node has its own, in its
// mount namespace).
const ovsLog = "/var/log/openvswitch/ovs-vswitchd.log"

// brIntRemade is how often the ovs-vswitchd of a node (in runs a command in that node's
// namespaces) has deleted br-int's own interface so far: once each time br-int was
// deleted and made again (a change of its datapath type does that).
func brIntRemade(t *testing.T, in func(args ...string) *exec.Cmd) int {
	t.Helper()
	if out, err := in("test", "-r", ovsLog).CombinedOutput(); err != nil {
		t.Fatalf("no ovs-vswitchd log %s on the node: %v %s", ovsLog, err, out)
	}
	out, _ := in("grep", "-c", "bridge br-int: deleted interface br-int on port", ovsLog).Output()
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("grep -c in %s: %q", ovsLog, out)
	}
	return n
}

// checkPlugKeptBrInt: the port of server id, on the node in runs commands in, is bound
// with that node's br-int datapath type in its VIF details, and plugging it (Nova through
// os-vif, which sets that type on br-int) did not make br-int again: before is
// brIntRemade from before the server was created.
func checkPlugKeptBrInt(t *testing.T, n *node, in func(args ...string) *exec.Cmd, id string, before int) {
	t.Helper()
	out, err := in("ovs-vsctl", "get", "bridge", "br-int", "datapath_type").CombinedOutput()
	datapath := strings.Trim(strings.TrimSpace(string(out)), `"`)
	if err != nil {
		t.Errorf("br-int's datapath type on the node: %q, %v", out, err)
		return
	}
	if datapath == "" {
		datapath = "system" // Open vSwitch's default, as ovn-controller publishes it
	}
	port := strings.Fields(n.field(t, "port", "list", "--server", id, "-f", "value", "-c", "ID"))
	if len(port) == 0 {
		t.Errorf("server %s has no port", id)
		return
	}
	var show struct {
		Details map[string]any `json:"binding_vif_details"`
	}
	if err := json.Unmarshal([]byte(n.field(t, "port", "show", port[0], "-f", "json", "-c", "binding_vif_details")), &show); err != nil {
		t.Fatalf("port show %s: %v", port[0], err)
	}
	if show.Details["datapath_type"] != datapath {
		t.Errorf("port %s of server %s bound with VIF details %v, want datapath_type %s (br-int's on its node)", port[0], id, show.Details, datapath)
	}
	if after := brIntRemade(t, in); after != before {
		t.Errorf("br-int was deleted and made again %d times while server %s was created and plugged (%s), want 0", after-before, id, ovsLog)
	}
}
