package ovnpki

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/osdcloud/osd/netsetup/ovnsb"
)

// ovnSchemaDir is where Debian's ovn-central puts OVN's schemas.
const ovnSchemaDir = "/usr/share/ovn"

// freePort is a loopback TCP port nobody listens on (now).
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// writePair writes p as dir/name.key and dir/name.crt and returns the paths.
func writePair(t *testing.T, dir, name string, p Pair) (key, cert string) {
	t.Helper()
	key, cert = filepath.Join(dir, name+".key"), filepath.Join(dir, name+".crt")
	if err := os.WriteFile(key, p.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cert, p.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return key, cert
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for i := 0; i < 200; i++ {
		if ok() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestSouthboundRBAC runs OVN's databases and ovn-northd from Debian's ovn-central the way
// the ovn chart does with TLS: the southbound database serves chassis on an SSL port whose
// Connection row has role=ovn-controller and Neutron and osd on a second, unrestricted SSL
// port; the northbound one on SSL. Certificates come from this package. It shows a client
// without a certificate, or with one from another CA, is refused; a chassis certificate
// registers its own chassis but cannot modify or delete another's; Neutron's certificate
// cannot write through the chassis port but can through its own; osd's Go client reads the
// chassis over SSL with its certificate.
func TestSouthboundRBAC(t *testing.T) {
	if testing.Short() {
		t.Skip("runs ovsdb-server and ovn-northd")
	}
	for _, tool := range []string{"ovsdb-tool", "ovsdb-server", "ovn-northd", "ovn-sbctl", "ovn-nbctl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not installed (test/deps.sh installs openvswitch-switch and ovn-central): %v", tool, err)
		}
	}
	now := time.Now()
	dir, err := os.MkdirTemp("", "osdovnpki")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })

	caPair, err := NewCA(now)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := ParseCA(caPair.CertPEM, caPair.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, caPair.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	server, err := ca.IssueServer("ovn-central", []string{"ovn-sb.openstack.svc.cluster.local"}, []net.IP{net.ParseIP("127.0.0.1")}, now)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, srvCert := writePair(t, dir, "server", server)
	clients := map[string]Pair{}
	for _, cn := range []string{"chassis-a", "chassis-b", "neutron-server", "osd"} {
		if clients[cn], err = ca.IssueClient(cn, now); err != nil {
			t.Fatal(err)
		}
		writePair(t, dir, cn, clients[cn])
	}
	otherPair, _ := NewCA(now)
	other, _ := ParseCA(otherPair.CertPEM, otherPair.KeyPEM)
	intruder, _ := other.IssueClient("chassis-a", now)
	writePair(t, dir, "intruder", intruder)

	chassisPort, centralPort, nbPort := freePort(t), freePort(t), freePort(t)
	tlsArgs := []string{"--private-key=" + srvKey, "--certificate=" + srvCert, "--ca-cert=" + caFile}
	start := func(name string, args ...string) {
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		out, err := os.Create(filepath.Join(dir, filepath.Base(name)+"-"+fmt.Sprint(len(args))+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); out.Close() })
	}
	for _, db := range []string{"nb", "sb"} {
		if out, err := exec.Command("ovsdb-tool", "create", filepath.Join(dir, db+".db"), filepath.Join(ovnSchemaDir, "ovn-"+db+".ovsschema")).CombinedOutput(); err != nil {
			t.Fatalf("ovsdb-tool create %s: %v\n%s", db, err, out)
		}
	}
	nbSock, sbSock := filepath.Join(dir, "nb.sock"), filepath.Join(dir, "sb.sock")
	start("ovsdb-server", append([]string{filepath.Join(dir, "nb.db"), "--remote=punix:" + nbSock,
		fmt.Sprintf("--remote=pssl:%d:127.0.0.1", nbPort), "--unixctl=" + filepath.Join(dir, "nb.ctl"), "-vfile:off"}, tlsArgs...)...)
	start("ovsdb-server", append([]string{filepath.Join(dir, "sb.db"), "--remote=punix:" + sbSock,
		"--remote=db:OVN_Southbound,SB_Global,connections",
		fmt.Sprintf("--remote=pssl:%d:127.0.0.1", centralPort), "--unixctl=" + filepath.Join(dir, "sb.ctl"), "-vfile:off"}, tlsArgs...)...)
	waitFor(t, "the database sockets", func() bool {
		_, e1 := os.Stat(nbSock)
		_, e2 := os.Stat(sbSock)
		return e1 == nil && e2 == nil
	})
	// What the chart's southbound container runs once its database answers.
	if out, err := exec.Command("ovn-sbctl", "--db=unix:"+sbSock, "--timeout=10", "init", "--",
		"set-connection", "role=ovn-controller", fmt.Sprintf("pssl:%d:127.0.0.1", chassisPort)).CombinedOutput(); err != nil {
		t.Fatalf("set-connection: %v\n%s", err, out)
	}
	start("ovn-northd", "--ovnnb-db=unix:"+nbSock, "--ovnsb-db=unix:"+sbSock, "--unixctl="+filepath.Join(dir, "northd.ctl"), "-vfile:off")
	waitFor(t, "ovn-northd to write the RBAC roles", func() bool {
		out, _ := exec.Command("ovn-sbctl", "--db=unix:"+sbSock, "--timeout=5", "--bare", "--columns=name", "list", "RBAC_Role").Output()
		return strings.Contains(string(out), "ovn-controller")
	})
	if out, _ := exec.Command("ovn-sbctl", "--db=unix:"+sbSock, "get-connection").CombinedOutput(); !strings.Contains(string(out), "pssl:") {
		t.Fatalf("get-connection = %s, want the chassis port", out)
	}

	sbctl := func(who string, port int, args ...string) (string, error) {
		base := []string{"--timeout=5", fmt.Sprintf("--db=ssl:127.0.0.1:%d", port),
			"-p", filepath.Join(dir, who+".key"), "-c", filepath.Join(dir, who+".crt"), "-C", caFile}
		out, err := exec.Command("ovn-sbctl", append(base, args...)...).CombinedOutput()
		return string(out), err
	}
	mustSB := func(who string, port int, args ...string) {
		t.Helper()
		if out, err := sbctl(who, port, args...); err != nil {
			t.Fatalf("ovn-sbctl as %s on %d %v: %v\n%s", who, port, args, err, out)
		}
	}
	refusedSB := func(who string, port int, args ...string) {
		t.Helper()
		if out, err := sbctl(who, port, args...); err == nil {
			t.Errorf("ovn-sbctl as %s on %d %v succeeded, want refused\n%s", who, port, args, out)
		}
	}

	// Chassis register themselves through the RBAC port.
	mustSB("chassis-a", chassisPort, "chassis-add", "chassis-a", "geneve", "127.0.0.2")
	mustSB("chassis-b", chassisPort, "chassis-add", "chassis-b", "geneve", "127.0.0.3")
	mustSB("chassis-a", chassisPort, "set", "chassis", "chassis-a", "external_ids:owner=a")
	// Another chassis' rows are out of reach.
	refusedSB("chassis-b", chassisPort, "set", "chassis", "chassis-a", "external_ids:owner=b")
	refusedSB("chassis-b", chassisPort, "chassis-del", "chassis-a")
	refusedSB("chassis-b", chassisPort, "chassis-add", "chassis-c", "geneve", "127.0.0.4")
	// Neutron's certificate names no chassis: nothing to write on the chassis port...
	refusedSB("neutron-server", chassisPort, "set", "chassis", "chassis-a", "external_ids:neutron=1")
	// ...and everything on its own.
	mustSB("neutron-server", centralPort, "set", "chassis", "chassis-a", "external_ids:neutron=1")
	// A certificate from another CA is refused on both ports, even with a chassis' name.
	refusedSB("intruder", chassisPort, "list", "chassis")
	refusedSB("intruder", centralPort, "list", "chassis")
	if out, _ := exec.Command("ovn-sbctl", "--db=unix:"+sbSock, "get", "chassis", "chassis-a", "external_ids:owner").Output(); strings.TrimSpace(string(out)) != `"a"` && strings.TrimSpace(string(out)) != "a" {
		t.Errorf("chassis-a's external_ids:owner = %q, want a (untouched by chassis-b)", out)
	}

	// The northbound database: Neutron writes over SSL; a stranger cannot.
	nbctl := func(who string, args ...string) (string, error) {
		base := []string{"--timeout=5", fmt.Sprintf("--db=ssl:127.0.0.1:%d", nbPort),
			"-p", filepath.Join(dir, who+".key"), "-c", filepath.Join(dir, who+".crt"), "-C", caFile}
		out, err := exec.Command("ovn-nbctl", append(base, args...)...).CombinedOutput()
		return string(out), err
	}
	if out, err := nbctl("neutron-server", "ls-add", "net1"); err != nil {
		t.Fatalf("ovn-nbctl ls-add as neutron-server: %v\n%s", err, out)
	}
	if out, err := nbctl("intruder", "ls-del", "net1"); err == nil {
		t.Errorf("ovn-nbctl ls-del with another CA's certificate succeeded\n%s", out)
	}

	// osd's own client (Go, libovsdb): with its certificate it reads the chassis; without
	// one, or on plain TCP, it is refused.
	osdCert, err := tls.X509KeyPair(clients["osd"].CertPEM, clients["osd"].KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ep := fmt.Sprintf("ssl:127.0.0.1:%d", centralPort)
	sb, err := ovnsb.Connect(ctx, ep, ClientTLS(ca.Cert, &osdCert, "127.0.0.1"))
	if err != nil {
		t.Fatalf("ovnsb.Connect with osd's certificate: %v", err)
	}
	list, err := sb.List(ctx)
	sb.Close()
	if err != nil || len(list) != 2 || list[0].Name != "chassis-a" || len(list[0].Encaps) != 1 {
		t.Errorf("List() over SSL = %+v, %v, want chassis-a and chassis-b with their encaps", list, err)
	}
	short, cancelShort := context.WithTimeout(ctx, 5*time.Second)
	defer cancelShort()
	if sb, err := ovnsb.Connect(short, ep, ClientTLS(ca.Cert, nil, "127.0.0.1")); err == nil {
		sb.Close()
		t.Errorf("ovnsb.Connect without a client certificate succeeded")
	}
	short2, cancelShort2 := context.WithTimeout(ctx, 5*time.Second)
	defer cancelShort2()
	if sb, err := ovnsb.Connect(short2, fmt.Sprintf("tcp:127.0.0.1:%d", centralPort), nil); err == nil {
		sb.Close()
		t.Errorf("ovnsb.Connect over plain TCP to the SSL port succeeded")
	}
}
