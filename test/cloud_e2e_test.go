package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// ovnTables are the OVN northbound tables Neutron writes for networks, ports, routers,
// floating IPs and security groups: after the test deletes what it made, each has as many
// rows as before.
var ovnTables = []string{"Logical_Switch", "Logical_Switch_Port", "Logical_Router", "Logical_Router_Port", "NAT", "ACL", "Port_Group", "DHCP_Options", "Address_Set"}

// ovnCounts counts the rows of ovnTables in the running OVN northbound database.
func (n *node) ovnCounts(t *testing.T) map[string]int {
	t.Helper()
	var script strings.Builder
	for _, tb := range ovnTables {
		fmt.Fprintf(&script, "echo %s $(ovn-nbctl --db=unix:/run/ovn/ovnnb_db.sock --bare --columns=_uuid list %s | grep -c .);", tb, tb)
	}
	out, err := n.kubectl("-n", "openstack", "exec", "deploy/ovn-central", "-c", "northd", "--", "sh", "-c", script.String())
	if err != nil {
		t.Fatalf("count OVN rows: %v\n%s", err, out)
	}
	counts := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var name string
		var c int
		if _, err := fmt.Sscanf(l, "%s %d", &name, &c); err == nil {
			counts[name] = c
		}
	}
	if len(counts) != len(ovnTables) {
		t.Fatalf("OVN row counts = %v from %q, want %d tables", counts, out, len(ovnTables))
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

// checkCloud exercises the whole cloud osd init leaves: a server through Debian's
// openstack client (ACTIVE, address from OVN DHCP, floating IP answers the host's ping),
// osd launch, a Heat stack with one server, Horizon in a browser, and deletion that leaves
// no row behind in Nova, Neutron or OVN.
func checkCloud(t *testing.T, n *node) {
	// Nova's metadata API lists security groups as the nova service user, and Neutron makes
	// the default security group of a project the first time it lists that project's
	// groups: project service gets one when the first guest reads its metadata. Make it
	// now, so that the counts compare what the test creates and deletes.
	n.field(t, "security", "group", "list", "--project", "service", "-f", "value", "-c", "ID")
	before := n.ovnCounts(t)
	artifacts := os.Getenv("OSD_ARTIFACTS")
	if artifacts == "" {
		artifacts = t.TempDir()
	}

	t.Run("server create reaches ACTIVE, OVN DHCP, floating IP answers ping", func(t *testing.T) {
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
		// Then it reads its own uuid from the metadata service (OVN metadata agent,
		// haproxy in the ovnmeta namespace, Nova's metadata API).
		metadata := "osd-guest: metadata uuid " + id
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline) && !strings.Contains(console, metadata) && !strings.Contains(console, "osd-guest: metadata unreachable"); time.Sleep(3 * time.Second) {
			console, _ = n.openstack("console", "log", "show", id)
		}
		if !strings.Contains(console, metadata) {
			t.Errorf("console log lacks %q (the guest did not get its uuid from http://169.254.169.254):\n%s", metadata, tail(console, 30))
		}
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
	})

	t.Run("osd launch", func(t *testing.T) {
		out, err := n.osd("launch", "e2e-launch")
		defer n.openstack("server", "delete", "--wait", "e2e-launch")
		if err != nil {
			t.Fatalf("osd launch: %v\n%s", err, out)
		}
		m := regexp.MustCompile(`floating IP\s+([0-9.]+)`).FindStringSubmatch(out)
		if m == nil || !strings.Contains(out, "ping after") {
			t.Fatalf("osd launch output lacks a floating IP that answered ping:\n%s", out)
		}
		if !strings.Contains(out, "the guest read its own uuid from http://169.254.169.254") {
			t.Errorf("osd launch output does not say the guest read its uuid from the metadata service:\n%s", out)
		}
		if _, err := waitPing(m[1], 10*time.Second); err != nil {
			t.Fatalf("after osd launch: %v", err)
		}
		t.Logf("osd launch:\n%s", out)
		// osd launch made the floating IP; it goes with the test (the server's deletion frees it).
		t.Cleanup(func() { n.openstack("floating", "ip", "delete", m[1]) })
	})

	t.Run("heat stack with one server", func(t *testing.T) {
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
	})

	t.Run("horizon login shows the instance", func(t *testing.T) {
		out, err := n.openstack("server", "create", "--flavor", "m1.tiny", "--image", "osd-test", "--network", "osd-net", "--wait", "-f", "value", "-c", "id", "e2e-horizon")
		if err != nil {
			t.Fatalf("server create: %v\n%s", err, out)
		}
		defer n.openstack("server", "delete", "--wait", strings.TrimSpace(out))
		user, pass := n.adminCredentials(t)
		checkHorizon(t, "http://127.0.0.1:30080", user, pass, "e2e-horizon", artifacts)
		t.Logf("screenshots in %s", artifacts)
	})

	t.Run("deleting leaves nothing in Nova, Neutron and OVN", func(t *testing.T) {
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
		if out, err := exec.Command("virsh", "-c", "qemu:///system", "list", "--all", "--name").Output(); err == nil && strings.Contains(string(out), "instance-") {
			t.Errorf("libvirt domains left on the host:\n%s", out)
		}
	})
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
