package guest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"
	"github.com/osdcloud/osd/bootstrap/images"

	"github.com/vishvananda/netns"
	"golang.org/x/crypto/ssh"
)

func need(t *testing.T, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces, libvirt)")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s missing: %v", tool, err)
		}
	}
}

func run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// buildTwice builds the image into a fresh cache dir (cold), then again
// (must be a cache hit), and checks what was built.
func buildTwice(t *testing.T) Image {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cache := t.TempDir()
	start := time.Now()
	img, err := Build(ctx, Options{CacheDir: cache})
	if err != nil {
		t.Fatalf("Build(cold): %v", err)
	}
	cold := time.Since(start)
	if img.Cached {
		t.Errorf("Build(cold) = cached, want built")
	}
	start = time.Now()
	again, err := Build(ctx, Options{CacheDir: cache})
	if err != nil {
		t.Fatalf("Build(again): %v", err)
	}
	warm := time.Since(start)
	st, _ := os.Stat(img.Initrd)
	t.Logf("guest image: kernel %s, modules %v, packages %v; initrd %.1f MB; cold build %s, cached %s",
		img.KernelVersion, img.Modules, img.Packages, float64(st.Size())/1e6, cold.Round(time.Millisecond), warm.Round(time.Millisecond))
	if !again.Cached || again.Key != img.Key || again.Kernel != img.Kernel || again.Initrd != img.Initrd {
		t.Errorf("Build(again) = %+v, want the cached %+v", again, img)
	}
	for _, m := range []string{"virtio_net", "virtio_pci", "failover", "net_failover"} {
		found := false
		for _, have := range img.Modules {
			found = found || have == m
		}
		if !found {
			t.Errorf("Build().Modules = %v, want %s among them (a module in this kernel)", img.Modules, m)
		}
	}
	if len(img.Modules) > 0 && img.Modules[len(img.Modules)-1] == "failover" {
		t.Errorf("Build().Modules = %v: failover loaded last, want dependencies first", img.Modules)
	}
	return img
}

// testNet is a bridge in the host namespace (no address: layer 2 only) with
// a veth whose peer sits in a namespace this test made, where udhcpd serves
// 10.253.<n>.0/24.
type testNet struct {
	ns, bridge, prefix, server string
	uuid                       string // what the namespace's metadata service says
	hostname                   string // the hostname in its meta_data.json
}

func makeTestNet(t *testing.T, dir string, publicKey string) testNet {
	t.Helper()
	sfx := randomHex(t, 3)
	n, _ := strconv.ParseUint(sfx[:2], 16, 8)
	tn := testNet{ns: "osdg-" + sfx, bridge: "osdgbr" + sfx, prefix: fmt.Sprintf("10.253.%d", n)}
	tn.server = tn.prefix + ".1"
	host, peer := "osdgh"+sfx, "osdgp"+sfx
	run(t, "ip", "netns", "add", tn.ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", tn.ns).Run() })
	run(t, "ip", "link", "add", tn.bridge, "type", "bridge")
	t.Cleanup(func() { exec.Command("ip", "link", "del", tn.bridge).Run() })
	run(t, "ip", "link", "add", host, "type", "veth", "peer", "name", peer)
	t.Cleanup(func() { exec.Command("ip", "link", "del", host).Run() })
	run(t, "ip", "link", "set", host, "master", tn.bridge, "up")
	run(t, "ip", "link", "set", tn.bridge, "up")
	run(t, "ip", "link", "set", peer, "netns", tn.ns)
	run(t, "ip", "-n", tn.ns, "addr", "add", tn.server+"/24", "dev", peer)
	run(t, "ip", "-n", tn.ns, "link", "set", peer, "up")
	run(t, "ip", "-n", tn.ns, "link", "set", "lo", "up")

	// A metadata service as Neutron's: 169.254.169.254 behind the .2 address the
	// classless static route names, serving the server's meta_data.json.
	tn.uuid = strings.Join([]string{randomHex(t, 4), randomHex(t, 2), randomHex(t, 2), randomHex(t, 2), randomHex(t, 6)}, "-")
	md := filepath.Join(dir, "metadata")
	if err := os.MkdirAll(filepath.Join(md, "openstack", "latest"), 0o755); err != nil {
		t.Fatal(err)
	}
	tn.hostname = "osd-guest-test"
	if err := os.WriteFile(filepath.Join(md, "openstack", "latest", "meta_data.json"), metaData(tn.uuid, tn.hostname+".novalocal", publicKey), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, "ip", "-n", tn.ns, "addr", "add", tn.prefix+".2/24", "dev", peer)
	run(t, "ip", "-n", tn.ns, "addr", "add", "169.254.169.254/32", "dev", "lo")
	httpd := exec.Command("ip", "netns", "exec", tn.ns, "busybox", "httpd", "-f", "-p", "169.254.169.254:80", "-h", md)
	if err := httpd.Start(); err != nil {
		t.Fatalf("start the metadata httpd: %v", err)
	}
	t.Cleanup(func() { httpd.Process.Kill(); httpd.Wait() })

	conf := filepath.Join(dir, "udhcpd.conf")
	leases := filepath.Join(dir, "udhcpd.leases")
	os.WriteFile(leases, nil, 0o644)
	cfg := fmt.Sprintf("start %[1]s.100\nend %[1]s.150\ninterface %[2]s\nlease_file %[3]s\npidfile %[4]s\nauto_time 1\noption subnet 255.255.255.0\noption router %[1]s.254\noption dns %[1]s.1\noption lease 600\n"+
		// As OVN's DHCP does: MTU and classless static routes (metadata and
		// default), which take precedence over the router option (RFC 3442).
		"option mtu 1400\noption staticroutes 169.254.169.254/32 %[1]s.2, 0.0.0.0/0 %[1]s.1\n",
		tn.prefix, peer, leases, filepath.Join(dir, "udhcpd.pid"))
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "udhcpd.log"))
	if err != nil {
		t.Fatal(err)
	}
	// -a 0: an offer at once, as OVN's native DHCP makes it, not after udhcpd's ARP probe
	// of the address (2 s by default), which would be most of the guest's /init to lease.
	cmd := exec.Command("ip", "netns", "exec", tn.ns, "busybox", "udhcpd", "-f", "-a", "0", conf)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start udhcpd: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("udhcpd log:\n%s", b)
		}
	})
	return tn
}

// TestBuildBootDHCP builds the guest image twice (cold, then cached), boots
// it under QEMU TCG through libvirt on a bridge whose only other member is a
// namespace running udhcpd and a metadata service, with a config drive attached
// as Nova attaches it, waits for the guest's lease marker on the serial console,
// and checks that it read the config drive and the metadata service (uuid, hostname,
// SSH key), that it answers ping and HTTP on port 80, and that OpenSSH's client logs
// in over SSH with the key from the metadata service, the host key pinned from the
// console.
func TestBuildBootDHCP(t *testing.T) {
	need(t, "apt-get", "dpkg-deb", "depmod", "ip", "busybox", "libvirtd", "virtlogd", "qemu-system-x86_64", "genisoimage", "ssh")
	img := buildTwice(t)

	l := startLibvirt(t)

	dir := guestDir(t)
	keyFile, publicKey := testKey(t, dir)
	tn := makeTestNet(t, dir, publicKey)
	// The config drive has another uuid than the metadata service, to tell them apart.
	driveUUID := "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"
	drive := configDrive(t, dir, metaData(driveUUID, tn.hostname+".novalocal", ""))

	g := bootGuest(t, l, dir, bootSpec{kernel: img.Kernel, initrd: img.Initrd, cmdline: CommandLine, bridge: tn.bridge, drive: drive})
	name, console, d, start := g.name, g.console, g.dom, g.start
	var c Console
	for {
		b, _ := os.ReadFile(console)
		c = ParseConsole(string(b))
		if c.Address != "" {
			break
		}
		if time.Since(start) > 2*time.Minute {
			tail := string(b)
			if len(tail) > 3000 {
				tail = tail[len(tail)-3000:]
			}
			t.Fatalf("no lease marker on the console after 2 min (parsed %+v); console tail:\n%s", c, tail)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if b, _ := os.ReadFile(console); !strings.Contains(string(b), "up gateway "+tn.server+" mtu 1400") {
		t.Errorf("console lacks the marker with gateway %s (from classless static routes) and mtu 1400", tn.server)
	}
	t.Logf("guest %s: boot to DHCP lease %s (console %+v)", name, time.Since(start).Round(time.Millisecond), c)
	// The guest's uptime when /init starts: the kernel's boot with the initramfs unpacked.
	bootLog, _ := os.ReadFile(console)
	for _, line := range strings.Split(string(bootLog), "\n") {
		if i := strings.Index(line, "init started"); i >= 0 {
			t.Logf("guest %s: %s", name, strings.TrimSpace(line[i:]))
			break
		}
	}
	for deadline := time.Now().Add(90 * time.Second); (c.MetadataUUID == "" && !c.MetadataFail || c.ConfigDrive == "" && !c.NoConfigDrive || c.SSHKeys == "" || c.SSHHostKey == "") && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		b, _ := os.ReadFile(console)
		c = ParseConsole(string(b))
	}
	if c.ConfigDrive == "" || c.ConfigDriveUUID != driveUUID {
		b, _ := os.ReadFile(console)
		t.Errorf("guest's config drive = %q with uuid %q (none found: %v), want config-2 with uuid %s; console:\n%s", c.ConfigDrive, c.ConfigDriveUUID, c.NoConfigDrive, driveUUID, tailLines(string(b), 15))
	}
	if c.Hostname != tn.hostname || c.SSHKeys != "osd-test-key" || !strings.HasPrefix(c.SSHHostKey, "ssh-ed25519 ") {
		t.Errorf("guest's hostname %q, SSH keys %q, host key %q; want %s, osd-test-key, an Ed25519 host key", c.Hostname, c.SSHKeys, c.SSHHostKey, tn.hostname)
	}
	if c.MetadataUUID != tn.uuid {
		b, _ := os.ReadFile(console)
		t.Errorf("guest's metadata uuid = %q (unreachable %v), want %s from the namespace's metadata service; console:\n%s", c.MetadataUUID, c.MetadataFail, tn.uuid, tailLines(string(b), 15))
	} else {
		t.Logf("guest read its uuid from the metadata service %s after boot", time.Since(start).Round(time.Millisecond))
	}
	ip, ipnet, err := net.ParseCIDR(c.Address)
	if err != nil || ipnet.String() != tn.prefix+".0/24" || c.Gateway != tn.server {
		t.Fatalf("guest address %q gateway %q, want one in %s.0/24 via %s", c.Address, c.Gateway, tn.prefix, tn.server)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := exec.Command("ip", "netns", "exec", tn.ns, "ping", "-c1", "-W1", ip.String()).CombinedOutput()
		if err == nil {
			t.Logf("ping %s from %s answered %s after boot", ip, tn.ns, time.Since(start).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ping %s from namespace %s: %v: %s", ip, tn.ns, err, out)
		}
	}
	knownHosts := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(knownHosts, []byte(ip.String()+" "+c.SSHHostKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The first login as soon as it works: boot to SSH.
	var out string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out, err = sshInNamespace(tn.ns, ip.String(), keyFile, knownHosts, "hostname; id -un; cat /proc/uptime")
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if lines := strings.Fields(out); err != nil || len(lines) < 3 || lines[0] != tn.hostname || lines[1] != LoginUser {
		b, _ := os.ReadFile(console)
		t.Fatalf("ssh %s@%s = %q, %v, want the hostname %s and the user; console:\n%s", LoginUser, ip, out, err, tn.hostname, tailLines(string(b), 20))
	}
	t.Logf("guest %s: boot to SSH login %s (guest uptime %s s)", name, time.Since(start).Round(time.Millisecond), strings.Fields(out)[2])
	// The login user pings (busybox's ping needs a raw socket: /bin/busybox is set-user-ID
	// root) and its shell holds no root: busybox's id shows an effective uid that differs.
	out, err = sshInNamespace(tn.ns, ip.String(), keyFile, knownHosts, "id; ping -c 3 -i 0.2 -W 2 "+tn.server)
	if err != nil || !strings.HasPrefix(out, "uid=1000("+LoginUser+")") || strings.Contains(out, "euid=") || !strings.Contains(out, "3 packets received") {
		t.Errorf("ssh %s@%s: id; ping -c 3 %s = %v:\n%s\nwant uid 1000 without another effective uid, and 3 replies", LoginUser, ip, tn.server, err, out)
	}
	// What Tempest's scenario tests run over SSH, as on CirrOS: curl against the metadata
	// service, sudo, the network and volume tools (PATH as Tempest's remote client sets it).
	tools := "set -e; PATH=$PATH:/sbin:/usr/sbin; curl -sS http://169.254.169.254/openstack/latest/meta_data.json; echo; " +
		"sudo id -u; for c in ip ping nc wget ifconfig hostname blkid mkfs.ext4 mount; do command -v $c >/dev/null || echo missing $c; done; " +
		"dd if=/dev/zero of=/tmp/vol bs=1M count=16; sudo mkfs.ext4 -F -q /tmp/vol; sudo blkid /tmp/vol"
	out, err = sshInNamespace(tn.ns, ip.String(), keyFile, knownHosts, tools)
	if err != nil || !strings.Contains(out, `"uuid": "`+tn.uuid+`"`) && !strings.Contains(out, `"uuid":"`+tn.uuid+`"`) || !strings.Contains(out, "\n0\n") || strings.Contains(out, "missing") || !strings.Contains(out, `TYPE="ext4"`) {
		t.Errorf("ssh %s@%s: curl the metadata service, sudo, tools = %v:\n%s\nwant meta_data.json with uuid %s, sudo id -u 0, no tool missing, an ext4 file system", LoginUser, ip, err, out, tn.uuid)
	} else {
		t.Logf("in the guest over SSH: curl read the metadata service, sudo is root, ip ping nc wget ifconfig hostname blkid mkfs.ext4 mount present")
	}
	// The machine image's disk on virtio-blk (as a volume attached later): 1 MiB, 2048 sectors.
	if out, err := sshInNamespace(tn.ns, ip.String(), keyFile, knownHosts, "cat /sys/block/vda/size"); err != nil || strings.TrimSpace(out) != "2048" {
		t.Errorf("ssh %s@%s: cat /sys/block/vda/size = %q, %v, want 2048 (the 1 MiB disk on virtio-blk)", LoginUser, ip, out, err)
	}
	// Go's SSH client (osd launch logs in with it) as well as OpenSSH's.
	// Go's client prefers RSA host keys: with any host key accepted, the server must make
	// one rather than drop the connection.
	for _, hk := range []string{c.SSHHostKey, ""} {
		if got, err := goSSHInNamespace(tn.ns, ip.String(), keyFile, hk, "id -un"); err != nil || strings.TrimSpace(got) != LoginUser {
			log, _ := sshInNamespace(tn.ns, ip.String(), keyFile, knownHosts, "tail -n 20 /var/log/dropbear.log")
			t.Errorf("Go's SSH client as %s@%s (host key %q) = %q, %v, want %s; dropbear's log:\n%s", LoginUser, ip, hk, got, err, LoginUser, log)
		}
	}
	for _, tc := range []struct{ port, req, want string }{
		{"80", "GET / HTTP/1.0\r\n\r\n", "osd-guest " + img.KernelVersion},
		{"22", "", "SSH-2.0-dropbear"}, // the server speaks first (and waits: read until the timeout)
	} {
		port, want := tc.port, tc.want
		var got string
		for deadline = time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
			got, err = tcpInNamespace(tn.ns, net.JoinHostPort(ip.String(), port), tc.req)
			if strings.Contains(got, want) || time.Now().After(deadline) {
				break
			}
		}
		if !strings.Contains(got, want) {
			t.Errorf("TCP %s:%s from %s = %q, %v, want it to contain %q", ip, port, tn.ns, got, err, want)
		}
	}
	rootRefused(t, tn.ns, ip.String(), keyFile, knownHosts)
	// A soft power off (the ACPI power button, as Nova's stop, rescue and resize press it)
	// ends the guest at once.
	t0 := time.Now()
	if err := l.DomainShutdown(d); err != nil {
		t.Fatalf("DomainShutdown: %v", err)
	}
	for {
		st, _, err := l.DomainGetState(d, 0)
		if err == nil && libvirt.DomainState(st) == libvirt.DomainShutoff {
			t.Logf("guest %s: soft power off took %s", name, time.Since(t0).Round(time.Millisecond))
			break
		}
		if time.Since(t0) > 30*time.Second {
			b, _ := os.ReadFile(console)
			diag, _ := sshInNamespace(tn.ns, ip.String(), keyFile, knownHosts, "ls -l /dev/input; cat /proc/bus/input/devices; ps; cat /var/log/acpid.log")
			t.Fatalf("guest %s still running 30 s after the ACPI power button (state %d, %v); console:\n%s\nin the guest:\n%s", name, st, err, tailLines(string(b), 10), diag)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// rootRefused checks that root may not log in over SSH, not even with the login user's key.
func rootRefused(t *testing.T, ns, ip, keyFile, knownHosts string) {
	t.Helper()
	if out, err := exec.Command("ip", "netns", "exec", ns, "ssh", "-i", keyFile, "-o", "UserKnownHostsFile="+knownHosts, "-o", "BatchMode=yes",
		"-o", "ConnectTimeout=5", "-o", "IdentitiesOnly=yes", "root@"+ip, "true").CombinedOutput(); err == nil {
		t.Errorf("ssh root@%s succeeded, want root refused: %s", ip, out)
	}
}

// metaData is a meta_data.json as Nova's metadata service and config drive serve it (its
// public key, if any, named osd-test-key, with the newline Nova keeps).
func metaData(uuid, hostname, publicKey string) []byte {
	doc := map[string]any{"uuid": uuid, "name": strings.Split(hostname, ".")[0], "hostname": hostname, "launch_index": 0,
		"availability_zone": "nova", "project_id": "0d6c3c1f2b7e4d5a9c8b7a6f5e4d3c2b", "meta": map[string]string{}}
	if publicKey != "" {
		doc["public_keys"] = map[string]string{"osd-test-key": publicKey + "\n"}
		doc["keys"] = []map[string]string{{"name": "osd-test-key", "type": "ssh", "data": publicKey + "\n"}}
	}
	b, _ := json.Marshal(doc)
	return b
}

// configDrive makes an ISO 9660 config drive holding doc as Nova does (genisoimage with
// the label config-2, Joliet and Rock Ridge).
func configDrive(t *testing.T, dir string, doc []byte) string {
	t.Helper()
	tree := filepath.Join(dir, "configdrive")
	if err := os.MkdirAll(filepath.Join(tree, "openstack", "latest"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, "openstack", "latest", "meta_data.json"), doc, 0o644); err != nil {
		t.Fatal(err)
	}
	iso := filepath.Join(dir, "disk.config")
	run(t, "genisoimage", "-o", iso, "-ldots", "-allow-lowercase", "-allow-multidot", "-l", "-publisher", "osd test", "-quiet", "-J", "-r", "-V", "config-2", tree)
	os.Chmod(iso, 0o644)
	return iso
}

// testKey makes an Ed25519 key pair: the private key file (OpenSSH format, 0600) and the
// public key in authorized_keys form.
func testKey(t *testing.T, dir string) (keyFile, public string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "osd boot test")
	if err != nil {
		t.Fatal(err)
	}
	keyFile = filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return keyFile, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp)))
}

// sshInNamespace runs command on the guest at ip as the login user, from inside network
// namespace ns, with OpenSSH's client: the key in keyFile, the host key pinned.
func sshInNamespace(ns, ip, keyFile, knownHosts, command string) (string, error) {
	out, err := exec.Command("ip", "netns", "exec", ns, "ssh", "-i", keyFile, "-o", "UserKnownHostsFile="+knownHosts,
		"-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "-o", "IdentitiesOnly=yes",
		LoginUser+"@"+ip, command).CombinedOutput()
	return string(out), err
}

// goSSHInNamespace logs in with golang.org/x/crypto/ssh from inside network namespace ns,
// accepting only hostKey (any when it is empty, the client's own algorithm preferences
// then deciding), and runs command.
func goSSHInNamespace(ns, ip, keyFile, hostKey, command string) (string, error) {
	b, err := os.ReadFile(keyFile)
	if err != nil {
		return "", err
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return "", err
	}
	cfg := &ssh.ClientConfig{User: LoginUser, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: ssh.InsecureIgnoreHostKey()}
	if hostKey != "" {
		hk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(hostKey))
		if err != nil {
			return "", err
		}
		cfg.HostKeyCallback, cfg.HostKeyAlgorithms = ssh.FixedHostKey(hk), []string{hk.Type()}
	}
	conn, err := dialInNamespace(ns, net.JoinHostPort(ip, "22"))
	if err != nil {
		return "", err
	}
	conn.SetDeadline(time.Now().Add(60 * time.Second)) // an RSA host key made under TCG takes a while
	cc, chans, reqs, err := ssh.NewClientConn(conn, ip+":22", cfg)
	if err != nil {
		conn.Close()
		return "", err
	}
	client := ssh.NewClient(cc, chans, reqs)
	defer client.Close()
	sess, err := client.NewSession()
	if err != nil {
		return "", err
	}
	defer sess.Close()
	out, err := sess.CombinedOutput(command)
	return string(out), err
}

// dialInNamespace opens a TCP connection from inside network namespace ns.
func dialInNamespace(ns, addr string) (net.Conn, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return nil, err
	}
	defer orig.Close()
	target, err := netns.GetFromName(ns)
	if err != nil {
		return nil, err
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		return nil, err
	}
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if serr := netns.Set(orig); serr != nil {
		panic("cannot return to the original network namespace: " + serr.Error())
	}
	return c, err
}

// tcpInNamespace connects to addr from inside network namespace ns, sends
// req and returns what the peer answers until it closes.
func tcpInNamespace(ns, addr, req string) (string, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return "", err
	}
	defer orig.Close()
	target, err := netns.GetFromName(ns)
	if err != nil {
		return "", err
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		return "", err
	}
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if serr := netns.Set(orig); serr != nil {
		panic("cannot return to the original network namespace: " + serr.Error())
	}
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(req)); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return string(b), err
}

func stopByPidFile(t *testing.T, pidfile string) {
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Errorf("pid file of a daemon this test started: %v", err)
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		t.Errorf("bad pid file %s: %q", pidfile, b)
		return
	}
	syscall.Kill(pid, syscall.SIGTERM)
}

// TestBuildOfflineUsesCache builds once, then builds with a mirror that
// cannot be reached and stale lists: the cached image must be used.
func TestBuildOfflineUsesCache(t *testing.T) {
	need(t, "apt-get", "dpkg-deb", "depmod")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cache := t.TempDir()
	img, err := Build(ctx, Options{CacheDir: cache})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	// 127.0.0.1:9 (discard) refuses connections: apt-get update fails at once.
	offline := []images.AptSource{{URI: "http://127.0.0.1:9/debian", Suite: "bookworm", Components: []string{"main"}}}
	got, err := Build(ctx, Options{CacheDir: cache, Sources: offline})
	if err != nil || !got.Cached || got.Key != img.Key {
		t.Errorf("Build(offline) = %+v, %v, want the cached image %s", got, err, img.Key)
	}
	if _, err := Build(ctx, Options{CacheDir: t.TempDir(), Sources: offline}); err == nil {
		t.Error("Build(offline, empty cache) = nil error, want an error")
	}
}

// tailLines is the last n lines of s.
func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// guestDir is a fresh directory for one boot's files (removed at the end of the test),
// readable by QEMU, which runs as libvirt-qemu.
func guestDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "osd-guest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	return dir
}
