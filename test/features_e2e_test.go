package test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func init() {
	registerE2E("optional compute and network features", stageCheck, checkOptionalFeatures)
}

// checkOptionalFeatures runs once each optional Nova and Neutron feature that needs a
// helper program in the images or a setting in the charts: a config drive (genisoimage
// in the compute image; the guest mounts the drive labelled config-2 and prints what it
// read), the console log, a snapshot of a running server, rescue and unrescue, a resize
// to the same host (allow_resize_to_same_host), and a trunk port whose parent keeps port
// security (Neutron's trunk service plugin), the server on it answering ping.
func checkOptionalFeatures(t *testing.T, n *node) {
	t.Run("config drive", func(t *testing.T) {
		id := n.bootServer(t, "e2e-configdrive", "--config-drive", "true", "--key-name", "osd-key")
		line := "osd-guest: config drive config-2 on "
		console := n.waitConsole(t, id, 3*time.Minute, line, "osd-guest: no config drive")
		i := strings.Index(console, line)
		if i < 0 {
			t.Fatalf("the guest did not find its config drive (label config-2):\n%s", tail(console, 30))
		}
		got, _, _ := strings.Cut(console[i:], "\n")
		if !strings.Contains(got, ": uuid "+id) {
			t.Errorf("config drive line = %q, want the server's uuid %s read from it", strings.TrimSpace(got), id)
		}
		t.Logf("%s", strings.TrimSpace(got))
	})

	t.Run("console log, snapshot, rescue, resize on one server", func(t *testing.T) {
		id := n.bootServer(t, "e2e-features")
		console := n.waitConsole(t, id, 3*time.Minute, "osd-guest: metadata uuid", "osd-guest: metadata unreachable")
		// The last lines only (Nova counts the empty one after the final newline). The guest
		// may print more meanwhile: the lines must be in the whole log read after them, and
		// reach at least to the end of the log read before them.
		out, err := n.openstack("console", "log", "show", "--lines", "5", id)
		later, _ := n.openstack("console", "log", "show", id)
		last := strings.TrimSpace(out)
		if i := strings.LastIndex(later, last); err != nil || last == "" || strings.Count(out, "\n") > 5 || i < 0 || i+len(last) < len(strings.TrimSpace(console)) {
			t.Errorf("console log show --lines 5 = %q, %v, want at most 5 lines, the end of the whole log (%q)", out, err, tail(later, 6))
		}
		if !strings.Contains(console, "osd-guest: init started") {
			t.Errorf("console log lacks the guest's start:\n%s", tail(console, 20))
		}

		t.Run("snapshot of the running server", func(t *testing.T) {
			t0 := time.Now()
			out, err := n.openstack("server", "image", "create", "--name", "e2e-snapshot", "--wait", "-f", "value", "-c", "id", id)
			snap := strings.TrimSpace(out)
			defer n.openstack("image", "delete", "e2e-snapshot")
			if err != nil {
				t.Fatalf("server image create: %v\n%s", err, out)
			}
			if st := n.field(t, "image", "show", snap, "-f", "value", "-c", "status"); st != "active" {
				t.Errorf("snapshot status = %s, want active", st)
			}
			if st := n.field(t, "server", "show", id, "-f", "value", "-c", "status"); st != "ACTIVE" {
				t.Errorf("server status after the snapshot = %s, want ACTIVE", st)
			}
			t.Logf("snapshot of the running server active after %s", time.Since(t0).Round(100*time.Millisecond))
		})

		t.Run("rescue and unrescue", func(t *testing.T) {
			t0 := time.Now()
			if out, err := n.openstack("server", "rescue", id); err != nil {
				t.Fatalf("server rescue: %v\n%s", err, out)
			}
			if err := n.waitStatus(id, "RESCUE", 3*time.Minute); err != nil {
				t.Fatal(err)
			}
			rescued := time.Since(t0)
			if out, err := n.openstack("server", "unrescue", id); err != nil {
				t.Fatalf("server unrescue: %v\n%s", err, out)
			}
			if err := n.waitStatus(id, "ACTIVE", 3*time.Minute); err != nil {
				t.Fatal(err)
			}
			t.Logf("RESCUE after %s, ACTIVE again after %s", rescued.Round(100*time.Millisecond), time.Since(t0).Round(100*time.Millisecond))
		})

		t.Run("resize to the same host", func(t *testing.T) {
			n.field(t, "flavor", "create", "--vcpus", "1", "--ram", "320", "--disk", "1", "-f", "value", "-c", "id", "e2e.resize")
			defer n.openstack("flavor", "delete", "e2e.resize")
			host := n.field(t, "server", "show", id, "-f", "value", "-c", "OS-EXT-SRV-ATTR:host")
			t0 := time.Now()
			if out, err := n.openstack("server", "resize", "--flavor", "e2e.resize", "--wait", id); err != nil {
				fault, _ := n.openstack("server", "show", id, "-f", "value", "-c", "status", "-c", "fault")
				t.Fatalf("server resize: %v\n%s\nserver: %s", err, out, fault)
			}
			if err := n.waitStatus(id, "VERIFY_RESIZE", 3*time.Minute); err != nil {
				t.Fatal(err)
			}
			if out, err := n.openstack("server", "resize", "confirm", id); err != nil {
				t.Fatalf("server resize confirm: %v\n%s", err, out)
			}
			if err := n.waitStatus(id, "ACTIVE", 2*time.Minute); err != nil {
				t.Fatal(err)
			}
			if fl := n.field(t, "server", "show", id, "-f", "value", "-c", "flavor"); !strings.Contains(fl, "e2e.resize") {
				t.Errorf("flavor after the resize = %s, want e2e.resize", fl)
			}
			if after := n.field(t, "server", "show", id, "-f", "value", "-c", "OS-EXT-SRV-ATTR:host"); after != host {
				t.Errorf("host after the resize = %s, want %s (the same host)", after, host)
			}
			t.Logf("resized and confirmed on %s in %s", host, time.Since(t0).Round(100*time.Millisecond))
		})
	})

	t.Run("trunk port with port security", func(t *testing.T) { checkTrunk(t, n) })
}

// checkTrunk makes a trunk whose parent port has port security and the default security
// group, with one VLAN subport, boots a server on the parent and pings its floating IP.
func checkTrunk(t *testing.T, n *node) {
	// The admin project's default security group comes with the port (an admin sees every
	// project's "default": the name is ambiguous).
	parent := n.field(t, "port", "create", "--network", "osd-net", "--enable-port-security", "-f", "value", "-c", "id", "e2e-trunk-parent")
	defer n.openstack("port", "delete", parent)
	sub := n.field(t, "port", "create", "--network", "osd-net", "-f", "value", "-c", "id", "e2e-trunk-sub")
	defer n.openstack("port", "delete", sub)
	out, err := n.openstack("network", "trunk", "create", "--parent-port", parent, "--subport", "port="+sub+",segmentation-type=vlan,segmentation-id=100", "-f", "value", "-c", "id", "e2e-trunk")
	if err != nil {
		t.Fatalf("network trunk create: %v\n%s", err, out)
	}
	trunk := strings.TrimSpace(out)
	defer n.openstack("network", "trunk", "delete", trunk)
	id := n.bootServer(t, "e2e-trunk", "--port", parent)
	if ps := n.field(t, "port", "show", parent, "-f", "value", "-c", "port_security_enabled", "-c", "security_group_ids"); !strings.HasPrefix(ps, "True\n") || len(strings.TrimSpace(ps)) < len("True\n")+36 {
		t.Errorf("trunk parent port_security_enabled, security groups = %q, want True and a group", ps)
	}
	var st string
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(3 * time.Second) {
		if st = n.field(t, "network", "trunk", "show", trunk, "-f", "value", "-c", "status"); st == "ACTIVE" {
			break
		}
	}
	if st != "ACTIVE" {
		t.Errorf("trunk status = %s after the server on its parent is ACTIVE, want ACTIVE", st)
	}
	fip := n.field(t, "floating", "ip", "create", "external", "-f", "value", "-c", "floating_ip_address")
	defer n.openstack("floating", "ip", "delete", fip)
	if out, err := n.openstack("server", "add", "floating", "ip", id, fip); err != nil {
		t.Fatalf("add floating ip: %v\n%s", err, out)
	}
	took, err := waitPing(fip, 3*time.Minute)
	if err != nil {
		t.Fatalf("server on the trunk's parent port: %v", err)
	}
	t.Logf("trunk %s, server on its parent answered ping on %s after %s", st, fip, took.Round(100*time.Millisecond))
}

// bootServer creates a server (m1.tiny, osd-test, on osd-net unless args name a port)
// and waits until it is ACTIVE; the test's cleanup deletes it.
func (n *node) bootServer(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := []string{"server", "create", "--flavor", "m1.tiny", "--image", "osd-test", "--wait", "-f", "value", "-c", "id"}
	hasPort := false
	for _, a := range args {
		hasPort = hasPort || a == "--port"
	}
	if !hasPort {
		cmd = append(cmd, "--network", "osd-net")
	}
	out, err := n.openstack(append(append(cmd, args...), name)...)
	id := strings.TrimSpace(out)
	t.Cleanup(func() { n.openstack("server", "delete", "--wait", name) })
	if err != nil || !uuidRE.MatchString(id) {
		fault, _ := n.openstack("server", "show", name, "-f", "value", "-c", "status", "-c", "fault")
		t.Fatalf("server create %s: %v\n%s\nserver: %s", name, err, out, fault)
	}
	return id
}

// waitConsole reads the server's console log until it holds one of the markers or
// timeout passes, and returns it.
func (n *node) waitConsole(t *testing.T, id string, timeout time.Duration, markers ...string) string {
	t.Helper()
	var console string
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(3 * time.Second) {
		console, _ = n.openstack("console", "log", "show", id)
		for _, m := range markers {
			if strings.Contains(console, m) {
				return console
			}
		}
	}
	return console
}

// waitStatus waits until the server has status want (an ERROR status ends the wait).
func (n *node) waitStatus(id, want string, timeout time.Duration) error {
	var st string
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		out, err := n.openstack("server", "show", id, "-f", "value", "-c", "status")
		st = strings.TrimSpace(out)
		if err == nil && st == want {
			return nil
		}
		if st == "ERROR" {
			break
		}
	}
	fault, _ := n.openstack("server", "show", id, "-f", "value", "-c", "fault")
	return fmt.Errorf("server %s is %s, want %s (waited up to %s); fault: %s", id, st, want, timeout, strings.TrimSpace(fault))
}
