package charts

import (
	"archive/tar"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/osdcloud/osd/daemon/deploy"
	"github.com/osdcloud/osd/netsetup/ovnpki"
)

// TestOVNCentralTLS runs ovn-central's three rendered start scripts (both databases and
// ovn-northd, which sets the chassis connection) with Debian's ovsdb-server and ovn-northd
// on loopback ports and certificates from ovnpki, then connects as the clients do: a
// chassis registers itself on the RBAC port and cannot touch another chassis; Neutron's
// certificate writes through the central port and the northbound database; a client
// without a certificate from the CA is refused everywhere.
func TestOVNCentralTLS(t *testing.T) {
	for _, tool := range []string{"ovsdb-tool", "ovsdb-server", "ovn-northd", "ovn-sbctl", "ovn-nbctl", "sh"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (test/deps.sh installs ovn-central): %v", tool, err)
		}
	}
	for _, db := range []string{"nb", "sb"} {
		if _, err := os.Stat("/usr/share/ovn/ovn-" + db + ".ovsschema"); err != nil {
			t.Skipf("OVN's schemas are not installed (ovn-central): %v", err)
		}
	}
	dir, err := os.MkdirTemp("", "osdovntls")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	now := time.Now()
	caPair, _ := ovnpki.NewCA(now)
	ca, err := ovnpki.ParseCA(caPair.CertPEM, caPair.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	write := func(sub, name string, data []byte) {
		os.MkdirAll(filepath.Join(dir, sub), 0o700)
		if err := os.WriteFile(filepath.Join(dir, sub, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	srv, _ := ca.IssueServer("ovn-central", deploy.OVNServerNames("openstack"), []net.IP{net.ParseIP("127.0.0.1")}, now)
	write("tls", "tls.key", srv.KeyPEM)
	write("tls", "tls.crt", srv.CertPEM)
	write("tls", "ca.crt", ca.CertPEM)
	for _, cn := range []string{"chassis-a", "chassis-b", "chassis-c", "neutron-server"} {
		p, _ := ca.IssueClient(cn, now)
		write(cn, "key", p.KeyPEM)
		write(cn, "crt", p.CertPEM)
	}
	otherPair, _ := ovnpki.NewCA(now)
	other, _ := ovnpki.ParseCA(otherPair.CertPEM, otherPair.KeyPEM)
	stranger, _ := other.IssueClient("chassis-a", now)
	write("stranger", "key", stranger.KeyPEM)
	write("stranger", "crt", stranger.CertPEM)

	free := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
	}
	nbPort, sbPort, centralPort := free(), free(), free()
	_, typed := renderService(t, "ovn", deploy.DeploymentSpec{Images: testImages})
	containers := typed["Deployment/ovn-central"].(*appsv1.Deployment).Spec.Template.Spec.Containers
	rewrite := strings.NewReplacer("/var/lib/ovn", filepath.Join(dir, "data"), "/run/ovn", filepath.Join(dir, "run"),
		"/etc/ovn/tls", filepath.Join(dir, "tls"),
		"pssl:6641:0.0.0.0", "pssl:"+nbPort+":127.0.0.1", "pssl:6642:0.0.0.0", "pssl:"+sbPort+":127.0.0.1",
		"pssl:16642:0.0.0.0", "pssl:"+centralPort+":127.0.0.1")
	os.MkdirAll(filepath.Join(dir, "data"), 0o700)
	os.MkdirAll(filepath.Join(dir, "run"), 0o700)
	for _, name := range []string{"ovsdb-nb", "ovsdb-sb", "northd"} {
		c := containerByName(containers, name)
		var out strings.Builder
		cmd := exec.Command("sh", "-ec", rewrite.Replace(c.Command[2]))
		cmd.Stdout, cmd.Stderr = &out, &out
		// The pod's /run/ovn is OVN's run directory (ovn-northd's control socket).
		cmd.Env = append(os.Environ(), "OVN_RUNDIR="+filepath.Join(dir, "run"))
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
			if t.Failed() {
				t.Logf("%s:\n%s", name, out.String())
			}
		})
	}
	sbctl := func(who, port string, args ...string) (string, error) {
		base := []string{"--timeout=5", "--db=ssl:127.0.0.1:" + port,
			"-p", filepath.Join(dir, who, "key"), "-c", filepath.Join(dir, who, "crt"), "-C", filepath.Join(dir, "tls", "ca.crt")}
		out, err := exec.Command("ovn-sbctl", append(base, args...)...).CombinedOutput()
		return string(out), err
	}
	// ovn-northd has filled the RBAC tables and the northd container set the chassis port.
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _ := exec.Command("ovn-sbctl", "--db=unix:"+filepath.Join(dir, "run", "ovnsb_db.sock"), "--timeout=2", "--bare", "--columns=name", "list", "RBAC_Role").Output()
		if _, err := sbctl("chassis-a", sbPort, "list", "SB_Global"); err == nil && strings.Contains(string(out), "ovn-controller") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ovn-central did not come up with the RBAC roles and the chassis port in 20 s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, tt := range []struct {
		who, port string
		args      []string
		ok        bool
	}{
		{"chassis-a", sbPort, []string{"chassis-add", "chassis-a", "geneve", "127.0.0.2"}, true},
		{"chassis-b", sbPort, []string{"chassis-add", "chassis-b", "geneve", "127.0.0.3"}, true},
		{"chassis-b", sbPort, []string{"set", "chassis", "chassis-a", "external_ids:x=b"}, false},
		{"chassis-b", sbPort, []string{"chassis-del", "chassis-a"}, false},
		// What Neutron's metadata agent writes with the chassis certificate: its own
		// chassis' Chassis_Private external_ids, and no other's.
		{"chassis-a", sbPort, []string{"--", "--id=@p", "create", "Chassis_Private", "name=chassis-a"}, true},
		{"chassis-a", sbPort, []string{"set", "Chassis_Private", "chassis-a", "external_ids:neutron\\:ovn-metadata-id=x"}, true},
		{"chassis-b", sbPort, []string{"set", "Chassis_Private", "chassis-a", "external_ids:neutron\\:ovn-metadata-id=y"}, false},
		{"neutron-server", sbPort, []string{"set", "chassis", "chassis-a", "external_ids:x=n"}, false},
		{"neutron-server", centralPort, []string{"set", "chassis", "chassis-a", "external_ids:x=n"}, true},
		{"stranger", sbPort, []string{"list", "chassis"}, false},
		{"stranger", centralPort, []string{"list", "chassis"}, false},
	} {
		out, err := sbctl(tt.who, tt.port, tt.args...)
		if (err == nil) != tt.ok {
			t.Errorf("ovn-sbctl as %s on port %s %v: err %v, want success %v\n%s", tt.who, tt.port, tt.args, err, tt.ok, out)
		}
	}
	nbctl := func(who string, args ...string) error {
		base := []string{"--timeout=5", "--db=ssl:127.0.0.1:" + nbPort,
			"-p", filepath.Join(dir, who, "key"), "-c", filepath.Join(dir, who, "crt"), "-C", filepath.Join(dir, "tls", "ca.crt")}
		return exec.Command("ovn-nbctl", append(base, args...)...).Run()
	}
	// Debian's ovn-controller registers its chassis with its certificate, on the RBAC port,
	// as the chart's controller script starts it (against an Open vSwitch database of the
	// test's own: OVS_RUNDIR keeps it off the host's bridges).
	t.Run("ovn-controller", func(t *testing.T) {
		if _, err := exec.LookPath("ovn-controller"); err != nil {
			t.Skipf("ovn-controller is not installed (test/deps.sh installs ovn-host): %v", err)
		}
		ovsDir := filepath.Join(dir, "ovs")
		os.MkdirAll(ovsDir, 0o700)
		ovsSock := filepath.Join(ovsDir, "db.sock")
		if out, err := exec.Command("ovsdb-tool", "create", filepath.Join(ovsDir, "conf.db"), "/usr/share/openvswitch/vswitch.ovsschema").CombinedOutput(); err != nil {
			t.Fatalf("ovsdb-tool create: %v\n%s", err, out)
		}
		env := append(os.Environ(), "OVS_RUNDIR="+ovsDir, "OVN_RUNDIR="+ovsDir)
		run := func(name string, args ...string) string {
			cmd := exec.Command(name, args...)
			cmd.Env = env
			log := filepath.Join(ovsDir, name+".log")
			out, err := os.Create(log)
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				cmd.Process.Kill()
				cmd.Wait()
				out.Close()
				if t.Failed() {
					b, _ := os.ReadFile(log)
					t.Logf("%s:\n%s", name, b)
				}
			})
			return log
		}
		run("ovsdb-server", filepath.Join(ovsDir, "conf.db"), "--remote=punix:"+ovsSock, "--unixctl="+filepath.Join(ovsDir, "ovsdb.ctl"), "-vfile:off")
		for i := 0; i < 100; i++ {
			if _, err := os.Stat(ovsSock); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		vsctl := exec.Command("ovs-vsctl", "--db=unix:"+ovsSock, "--no-wait", "--timeout=10", "init", "--", "set", "open", ".",
			"external_ids:system-id=chassis-c", "external_ids:hostname=node-c", "external_ids:ovn-remote=ssl:127.0.0.1:"+sbPort,
			"external_ids:ovn-encap-type=geneve", "external_ids:ovn-encap-ip=127.0.0.4")
		vsctl.Env = env
		if out, err := vsctl.CombinedOutput(); err != nil {
			t.Fatalf("ovs-vsctl: %v\n%s", err, out)
		}
		ctlLog := run("ovn-controller", "unix:"+ovsSock, "--private-key="+filepath.Join(dir, "chassis-c", "key"),
			"--certificate="+filepath.Join(dir, "chassis-c", "crt"), "--ca-cert="+filepath.Join(dir, "tls", "ca.crt"),
			"--pidfile="+filepath.Join(ovsDir, "ovn-controller.pid"), "-vconsole:info", "-vfile:off")
		deadline := time.Now().Add(20 * time.Second)
		for {
			out, _ := exec.Command("ovn-sbctl", "--db=unix:"+filepath.Join(dir, "run", "ovnsb_db.sock"), "--timeout=2", "--bare", "--columns=hostname", "find", "Chassis", "name=chassis-c").Output()
			priv, _ := exec.Command("ovn-sbctl", "--db=unix:"+filepath.Join(dir, "run", "ovnsb_db.sock"), "--timeout=2", "--bare", "--columns=name", "find", "Chassis_Private", "name=chassis-c").Output()
			if strings.TrimSpace(string(out)) == "node-c" && strings.TrimSpace(string(priv)) == "chassis-c" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("ovn-controller did not register chassis-c (Chassis %q, Chassis_Private %q) in 20 s", out, priv)
			}
			time.Sleep(200 * time.Millisecond)
		}
		// Nothing else it writes is refused by the role.
		time.Sleep(2 * time.Second)
		if b, _ := os.ReadFile(ctlLog); strings.Contains(string(b), "permission error") {
			t.Errorf("ovn-controller's writes were refused:\n%s", b)
		}
	})
	// Neutron's own client library (Python's ovs.stream, from the openstack image) with
	// the server's EC key: its certificate is accepted on both of its ports; another CA's is not.
	t.Run("neutron's python client", func(t *testing.T) {
		pypath := pythonOVS(t)
		py := func(who, port string) (string, error) {
			cmd := exec.Command("python3", "-c", ovsdbPython, filepath.Join(dir, who, "key"), filepath.Join(dir, who, "crt"), filepath.Join(dir, "tls", "ca.crt"), "ssl:127.0.0.1:"+port)
			cmd.Env = append(os.Environ(), "PYTHONPATH="+pypath)
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		for _, tt := range []struct {
			who, port, want string
		}{{"neutron-server", centralPort, "OVN_Southbound"}, {"neutron-server", nbPort, "OVN_Northbound"}, {"chassis-a", sbPort, "OVN_Southbound"}} {
			if out, err := py(tt.who, tt.port); err != nil || !strings.Contains(out, tt.want) {
				t.Errorf("python ovs as %s on %s = %v, %q, want %s", tt.who, tt.port, err, out, tt.want)
			}
		}
		if out, err := py("stranger", centralPort); err == nil {
			t.Errorf("python ovs with another CA's certificate = %q, want refused", out)
		}
	})
	if err := nbctl("neutron-server", "ls-add", "net1"); err != nil {
		t.Errorf("ovn-nbctl ls-add as neutron-server: %v", err)
	}
	if err := nbctl("stranger", "ls-del", "net1"); err == nil {
		t.Errorf("ovn-nbctl ls-del with another CA's certificate succeeded")
	}
}

// pythonOVS extracts Open vSwitch's Python library (what Neutron's ovsdbapp connects
// with) from the openstack image in osd's image cache into a directory for PYTHONPATH;
// the test is skipped when the cache holds no openstack image.
func pythonOVS(t *testing.T) string {
	t.Helper()
	ii, err := layout.ImageIndexFromPath(filepath.Join(cacheDir(), "images", "oci"))
	if err != nil {
		t.Skipf("no image cache (osd images build openstack makes it): %v", err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	const prefix = "usr/lib/python3/dist-packages/ovs/"
	for _, d := range im.Manifests {
		if d.Annotations["org.osdcloud.osd.image"] != "openstack" {
			continue
		}
		img, err := ii.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		out, n := t.TempDir(), 0
		for _, l := range layers {
			rc, err := l.Uncompressed()
			if err != nil {
				t.Fatal(err)
			}
			tr := tar.NewReader(rc)
			for {
				h, err := tr.Next()
				if err != nil {
					break
				}
				name := strings.TrimPrefix(h.Name, "./")
				if !strings.HasPrefix(name, prefix) || h.Typeflag != tar.TypeReg || !strings.HasSuffix(name, ".py") {
					continue
				}
				dst := filepath.Join(out, "ovs", filepath.FromSlash(strings.TrimPrefix(name, prefix)))
				os.MkdirAll(filepath.Dir(dst), 0o755)
				b, _ := io.ReadAll(tr)
				if err := os.WriteFile(dst, b, 0o644); err != nil {
					t.Fatal(err)
				}
				n++
			}
			rc.Close()
		}
		if n > 0 {
			return out
		}
	}
	t.Skip("the image cache has no openstack image with python3-openvswitch")
	return ""
}

// ovsdbPython is what Neutron's Python OVSDB client does first over SSL: its key,
// certificate and CA set on ovs.stream, then list_dbs over JSON-RPC.
const ovsdbPython = `import sys, ovs.stream, ovs.jsonrpc
key, cert, ca, remote = sys.argv[1:5]
ovs.stream.Stream.ssl_set_private_key_file(key)
ovs.stream.Stream.ssl_set_certificate_file(cert)
ovs.stream.Stream.ssl_set_ca_cert_file(ca)
err, stream = ovs.stream.Stream.open_block(ovs.stream.Stream.open(remote), 5000)
if err:
    sys.exit("open %s: %s" % (remote, err))
err, reply = ovs.jsonrpc.Connection(stream).transact_block(ovs.jsonrpc.Message.create_request("list_dbs", []))
if err or reply.error:
    sys.exit("list_dbs: %s %s" % (err, reply and reply.error))
print(" ".join(reply.result))
`
