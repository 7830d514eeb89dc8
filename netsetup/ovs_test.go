package netsetup

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestOVSBridgeTraffic runs a private OVS inside a "host" namespace and connects two
// more namespaces through a netdev bridge with veth pairs: ping and TCP must pass.
func TestOVSBridgeTraffic(t *testing.T) {
	requireHost(t)
	start := time.Now()
	hostNS := newNetNS(t, "host")
	vm1 := newNetNS(t, "vm1")
	vm2 := newNetNS(t, "vm2")
	c := startPrivateOVS(t, hostNS)
	o := connectOVS(t, c)
	ctx := context.Background()

	if changed, err := EnsureOVS(ctx, c); err != nil || changed {
		t.Fatalf("EnsureOVS(running) = %v, %v, want false, nil", changed, err)
	}
	oc, err := o.OtherConfig(ctx)
	if err != nil || oc["userspace-tso-enable"] != "true" {
		t.Fatalf("OtherConfig() = %v, %v, want userspace-tso-enable=true", oc, err)
	}
	if changed, err := o.EnsureBridge(ctx, "br-int-test", DatapathNetdev); err != nil || !changed {
		t.Fatalf("EnsureBridge(br-int-test) = %v, %v, want true, nil", changed, err)
	}
	if changed, err := o.EnsureBridge(ctx, "br-int-test", DatapathNetdev); err != nil || changed {
		t.Fatalf("EnsureBridge(br-int-test) again = %v, %v, want false, nil", changed, err)
	}
	veth(t, hostNS, "v1h", "", vm1, "eth0", "10.99.0.1/24")
	veth(t, hostNS, "v2h", "", vm2, "eth0", "10.99.0.2/24")
	for _, p := range []string{"v1h", "v2h"} {
		if changed, err := o.EnsurePort(ctx, "br-int-test", p, ""); err != nil || !changed {
			t.Fatalf("EnsurePort(%s) = %v, %v, want true, nil", p, changed, err)
		}
		if changed, err := o.EnsurePort(ctx, "br-int-test", p, ""); err != nil || changed {
			t.Fatalf("EnsurePort(%s) again = %v, %v, want false, nil", p, changed, err)
		}
		waitPortReady(t, o, p)
	}
	bridges, err := o.Bridges(ctx)
	if err != nil || len(bridges) != 1 || bridges[0].DatapathType != DatapathNetdev || len(bridges[0].Ports) != 3 {
		t.Fatalf("Bridges() = %+v, %v, want br-int-test (netdev) with 3 ports", bridges, err)
	}
	ready := time.Now()
	ping(t, vm1, "10.99.0.2")
	ping(t, vm2, "10.99.0.1")
	if got := tcpExchange(t, vm2, "10.99.0.2:5001", vm1, 4<<20); got != "10.99.0.1" {
		t.Fatalf("TCP peer seen by vm2 = %s, want 10.99.0.1", got)
	}
	t.Logf("setup %v, ping+4 MiB TCP echo %v", ready.Sub(start), time.Since(ready))

	for _, p := range []string{"v1h", "v2h"} {
		if changed, err := o.DeletePort(ctx, "br-int-test", p); err != nil || !changed {
			t.Fatalf("DeletePort(%s) = %v, %v, want true, nil", p, changed, err)
		}
	}
	if changed, err := o.DeleteBridge(ctx, "br-int-test"); err != nil || !changed {
		t.Fatalf("DeleteBridge = %v, %v, want true, nil", changed, err)
	}
	if bridges, err := o.Bridges(ctx); err != nil || len(bridges) != 0 {
		t.Fatalf("Bridges() after delete = %+v, %v, want none", bridges, err)
	}
}

// TestEnsureOVSLifecycle: a running vswitchd without userspace TSO is restarted once
// the netdev datapath asks for it; stop and start again keeps the database and its
// system-id; StopOVS leaves no daemon.
func TestEnsureOVSLifecycle(t *testing.T) {
	requireHost(t)
	ns := newNetNS(t, "host")
	c := startPrivateOVS(t, ns)
	c.Datapath = DatapathSystem // no TSO wanted: the setting goes away, vswitchd restarts
	ctx := context.Background()
	pid := daemonPID(c.pidfile("ovs-vswitchd"), "ovs-vswitchd")
	if changed, err := EnsureOVS(ctx, c); err != nil || !changed {
		t.Fatalf("EnsureOVS(system) = %v, %v, want true, nil", changed, err)
	}
	pid2 := daemonPID(c.pidfile("ovs-vswitchd"), "ovs-vswitchd")
	if pid2 == 0 || pid2 == pid {
		t.Fatalf("ovs-vswitchd pid after TSO change = %d (before %d), want a new process", pid2, pid)
	}
	c.Datapath = DatapathNetdev
	if changed, err := EnsureOVS(ctx, c); err != nil || !changed {
		t.Fatalf("EnsureOVS(netdev) = %v, %v, want true, nil", changed, err)
	}
	o := connectOVS(t, c)
	ids, err := o.ExternalIDs(ctx)
	if err != nil || len(ids["system-id"]) != 36 {
		t.Fatalf("ExternalIDs() = %v, %v, want a UUID system-id", ids, err)
	}

	// A netdev bridge makes the userspace datapath create its tap, which outlives
	// ovs-vswitchd unless StopOVS deletes it.
	if _, err := o.EnsureBridge(ctx, "br-tap-test", DatapathNetdev); err != nil {
		t.Fatalf("EnsureBridge(netdev) = %v", err)
	}
	for i := 0; ; i++ { // ovs-vswitchd makes it when it reconfigures
		out, err := exec.Command("ip", "-n", filepath.Base(ns), "link", "show", netdevTap).CombinedOutput()
		if err == nil {
			break
		}
		if i == 100 {
			t.Fatalf("no %s 10 s after a netdev bridge: %v\n%s", netdevTap, err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	o.Close()

	if err := StopOVS(ctx, c); err != nil {
		t.Fatalf("StopOVS = %v, want nil", err)
	}
	for _, d := range []string{"ovs-vswitchd", "ovsdb-server"} {
		if pid := daemonPID(c.pidfile(d), d); pid != 0 {
			t.Fatalf("%s still running as %d after StopOVS", d, pid)
		}
	}
	if out, err := exec.Command("ip", "-n", filepath.Base(ns), "link", "show", netdevTap).CombinedOutput(); err == nil {
		t.Fatalf("%s still there after StopOVS:\n%s", netdevTap, out)
	}
	if err := StopOVS(ctx, c); err != nil {
		t.Fatalf("StopOVS(stopped) = %v, want nil", err)
	}
	if changed, err := EnsureOVS(ctx, c); err != nil || !changed {
		t.Fatalf("EnsureOVS(after stop) = %v, %v, want true, nil", changed, err)
	}
	o2 := connectOVS(t, c)
	ids2, err := o2.ExternalIDs(ctx)
	if err != nil || ids2["system-id"] != ids["system-id"] {
		t.Fatalf("system-id after restart = %v, %v, want %s", ids2["system-id"], err, ids["system-id"])
	}
	if _, err := o2.SetExternalIDs(ctx, map[string]string{"ovn-bridge-mappings": "physnet1:br-ex"}); err != nil {
		t.Fatal(err)
	}
	if changed, err := o2.SetExternalIDs(ctx, map[string]string{"ovn-bridge-mappings": "physnet1:br-ex"}); err != nil || changed {
		t.Fatalf("SetExternalIDs(same) = %v, %v, want false, nil", changed, err)
	}
}
