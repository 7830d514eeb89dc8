package test

import (
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

func init() { registerE2E("tenant isolation", stageCheck, checkTenantIsolation) }

// isolationProbe is busybox sh that defines probe NAME IP PORT: a TCP connect with a
// 3 s timeout (busybox's nc, $NC), printing "probe NAME open" when it was established (nc
// says nothing: the peer closed, or timeout ended the idle connection), "probe NAME
// closed: why" when it timed out (the firewall drops), "probe NAME reached: why" when it
// was refused or had no route (an answer from the far side: nothing dropped it, so this is
// no proof the firewall closes it), and "probe NAME error: what" otherwise. Only "open"
// and "closed" pass. The same busybox runs it in the guest and in the LAN neighbour's
// namespace.
const isolationProbe = `probe() {
	r=$(timeout 8 $NC -w 3 "$2" "$3" </dev/null 2>&1 >/dev/null)
	case "$r" in
	"") echo "probe $1 open" ;;
	*"timed out"*) echo "probe $1 closed: $r" ;;
	*refused*|*nreachable*|*"No route"*) echo "probe $1 reached: $r" ;;
	*) echo "probe $1 error: $r" ;;
	esac
}
`

// isolationTarget is one TCP endpoint a zone must (open) or must not reach.
type isolationTarget struct {
	name, ip string
	port     int
	open     bool
}

// probeScript runs every target's probe in parallel with nc (a command line) and waits
// for them all.
func probeScript(nc string, targets []isolationTarget) string {
	var b strings.Builder
	fmt.Fprintf(&b, "NC=%q\n", nc)
	b.WriteString(isolationProbe)
	for _, tg := range targets {
		fmt.Fprintf(&b, "probe %s %s %d &\n", tg.name, tg.ip, tg.port)
	}
	b.WriteString("wait\n")
	return b.String()
}

var probeLineRE = regexp.MustCompile(`(?m)^probe (\S+) (open|closed|reached|error)(.*)$`)

// judgeProbes fails the test for every target whose probe says otherwise than wanted, or
// that printed nothing.
func judgeProbes(t *testing.T, zone string, targets []isolationTarget, out string) {
	t.Helper()
	got := map[string]string{}
	for _, m := range probeLineRE.FindAllStringSubmatch(out, -1) {
		got[m[1]] = m[2] + m[3]
	}
	closed, open := 0, 0
	for _, tg := range targets {
		r, ok := got[tg.name]
		switch {
		case !ok:
			t.Errorf("from %s: no result for %s (%s:%d); output:\n%s", zone, tg.name, tg.ip, tg.port, tail(out, 40))
		case tg.open && !strings.HasPrefix(r, "open"):
			t.Errorf("from %s: %s (%s:%d) = %s, want it reachable", zone, tg.name, tg.ip, tg.port, r)
		case !tg.open && !strings.HasPrefix(r, "closed"):
			t.Errorf("from %s: %s (%s:%d) = %s, want it dropped (closed by the firewall)", zone, tg.name, tg.ip, tg.port, r)
		case tg.open:
			open++
		default:
			closed++
		}
	}
	t.Logf("from %s: %d internal endpoints closed, %d public ones open", zone, closed, open)
}

// checkTenantIsolation (issue 35, item 1): from inside a tenant server, logged in over
// SSH, and from a network namespace playing a LAN neighbour that routes the pod and
// service CIDRs through the host, the cloud's insides are closed (MariaDB, RabbitMQ,
// memcached, both OVN databases and CoreDNS at their ClusterIPs, a pod's own address, the
// VNC ports, the k3s API, the kubelet, on 172.24.4.1 and on the node's address; osd's
// HTTPS API from the guest), the service names do not resolve, and the public endpoints
// of the catalog answer, as does the metadata service for the guest. From the LAN osd's
// API stays reachable (its join routes are for joining nodes) and refuses a client
// without a certificate anything else.
func checkTenantIsolation(t *testing.T, n *node) {
	internal, nodeIP, public := isolationTargets(t, n)
	closedOn := func(addrs ...string) []isolationTarget {
		var out []isolationTarget
		for _, a := range addrs {
			tag := strings.ReplaceAll(a, ".", "_")
			for _, p := range []int{5900, 5901, 5902, 5903} {
				out = append(out, isolationTarget{name: fmt.Sprintf("vnc%d@%s", p, tag), ip: a, port: p})
			}
			out = append(out, isolationTarget{name: "k3s-api@" + tag, ip: a, port: 6443},
				isolationTarget{name: "kubelet@" + tag, ip: a, port: 10250})
		}
		return out
	}
	hostPorts := closedOn("172.24.4.1", nodeIP)
	t.Run("from a guest", func(t *testing.T) {
		login := launchForIsolation(t, n)
		targets := append(append(append([]isolationTarget{}, internal...), hostPorts...), public...)
		for _, a := range []string{"172.24.4.1", nodeIP} {
			targets = append(targets, isolationTarget{name: "osd-api@" + strings.ReplaceAll(a, ".", "_"), ip: a, port: 8443})
		}
		script := probeScript("nc", targets) +
			"nslookup mariadb.openstack.svc.cluster.local 10.43.0.10 >/dev/null 2>&1 && echo 'dns resolved' || echo 'dns failed'\n" +
			// busybox 1.35's wget -T crashes in the guest (segmentation fault): timeout bounds it.
			"timeout 15 wget -q -O - http://" + net.JoinHostPort(nodeIP, "30500") + "/v3 2>&1 | head -c 300; echo\n" +
			"timeout 15 wget -q -O - http://169.254.169.254/openstack/latest/meta_data.json 2>&1 | head -c 300; echo\n"
		out, err := login(script)
		if err != nil {
			t.Fatalf("ssh into the guest: %v\n%s", err, out)
		}
		judgeProbes(t, "the guest", targets, out)
		if !strings.Contains(out, "dns failed") {
			t.Errorf("the guest resolved a service name through CoreDNS's ClusterIP:\n%s", tail(out, 10))
		}
		if !strings.Contains(out, `"version"`) {
			t.Errorf("Keystone's public endpoint on %s did not answer the guest:\n%s", nodeIP, tail(out, 10))
		}
		if !strings.Contains(out, `"uuid"`) {
			t.Errorf("the metadata service did not answer the guest:\n%s", tail(out, 10))
		}
	})
	t.Run("from a LAN neighbour", func(t *testing.T) {
		ns := lanNeighbour(t)
		targets := append(append(append([]isolationTarget{}, internal...), hostPorts...), public...)
		targets = append(targets, closedOn(lanHostAddr)...)
		targets = append(targets, isolationTarget{name: "osd-api@node", ip: nodeIP, port: 8443, open: true})
		out, err := exec.Command("ip", "netns", "exec", ns, "busybox", "sh", "-c", probeScript("busybox nc", targets)).CombinedOutput()
		if err != nil {
			t.Fatalf("probes in %s: %v\n%s", ns, err, out)
		}
		judgeProbes(t, "the LAN", targets, string(out))
		// osd's API answers a client without a certificate only on the join routes.
		code, _ := exec.Command("ip", "netns", "exec", ns, "curl", "-sk", "-m", "10", "-o", "/dev/null", "-w", "%{http_code}",
			"https://"+net.JoinHostPort(nodeIP, "8443")+"/1.0/cluster/members").Output()
		if c := strings.TrimSpace(string(code)); strings.HasPrefix(c, "2") {
			t.Errorf("GET https://%s:8443/1.0/cluster/members without a client certificate from the LAN = %s, want it refused", nodeIP, c)
		}
	})
}

// isolationTargets are the internals every zone must find closed (the ClusterIPs of
// MariaDB, RabbitMQ, memcached, the OVN databases and CoreDNS, and a pod's own address),
// the node's address (the host of Keystone's public endpoint), and the public endpoints of
// the catalog on it, which must be open.
func isolationTargets(t *testing.T, n *node) (internal []isolationTarget, nodeIP string, public []isolationTarget) {
	t.Helper()
	for _, s := range []struct {
		ns, name string
		port     int
	}{
		{"openstack", "mariadb", 3306}, {"openstack", "rabbitmq", 5672}, {"openstack", "memcached", 11211},
		{"openstack", "ovn-nb", 6641}, {"openstack", "ovn-sb", 6642}, {"kube-system", "kube-dns", 53},
	} {
		out, err := n.kubectl("get", "service", "-n", s.ns, s.name, "-o", "jsonpath={.spec.clusterIP}")
		ip := strings.TrimSpace(out)
		if err != nil || net.ParseIP(ip) == nil {
			t.Fatalf("ClusterIP of %s/%s: %v %q", s.ns, s.name, err, out)
		}
		internal = append(internal, isolationTarget{name: s.name, ip: ip, port: s.port})
	}
	// EndpointSlices, not Endpoints: kubectl warns on stderr (in the output) that v1
	// Endpoints are deprecated.
	out, err := n.kubectl("get", "endpointslices", "-n", "openstack", "-l", "kubernetes.io/service-name=mariadb-headless",
		"-o", "jsonpath={.items[0].endpoints[0].addresses[0]}")
	if ip := strings.TrimSpace(out); err == nil && net.ParseIP(ip) != nil {
		internal = append(internal, isolationTarget{name: "mariadb-pod", ip: ip, port: 3306})
	} else {
		t.Errorf("MariaDB's pod address: %v %q", err, out)
	}
	eps := n.publicEndpoints(t)
	var rels []string
	for rel := range eps {
		rels = append(rels, rel)
	}
	sort.Strings(rels)
	seen := map[string]bool{}
	for _, rel := range rels {
		for _, raw := range eps[rel] {
			u, err := url.Parse(raw)
			if err != nil || u.Port() == "" {
				t.Errorf("public endpoint %q of %s has no host:port", raw, rel)
				continue
			}
			if rel == "keystone" {
				nodeIP = u.Hostname()
			}
			if seen[u.Host] {
				continue
			}
			seen[u.Host] = true
			var port int
			fmt.Sscan(u.Port(), &port)
			public = append(public, isolationTarget{name: rel + "-" + u.Port(), ip: u.Hostname(), port: port, open: true})
		}
	}
	if ip := net.ParseIP(nodeIP); ip == nil || ip.IsLoopback() {
		t.Fatalf("Keystone's public endpoint names %q, want the node's address", nodeIP)
	}
	return internal, nodeIP, public
}

// launchForIsolation boots a server with osd launch (deleted with its floating IP at
// cleanup) and returns a function that runs a busybox sh script in it over SSH as osd.
func launchForIsolation(t *testing.T, n *node) func(script string) (string, error) {
	t.Helper()
	out, err := n.osd("launch", "e2e-isolation")
	t.Cleanup(func() { n.openstack("server", "delete", "--wait", "e2e-isolation") })
	if err != nil {
		t.Fatalf("osd launch: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`floating IP\s+([0-9.]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("osd launch output lacks a floating IP:\n%s", out)
	}
	t.Cleanup(func() { n.openstack("floating", "ip", "delete", m[1]) })
	cmd := regexp.MustCompile(`(?m)^ssh\s+(ssh -i \S+ -o UserKnownHostsFile=\S+ osd@` + regexp.QuoteMeta(m[1]) + `)$`).FindStringSubmatch(out)
	if cmd == nil {
		t.Fatalf("osd launch output lacks the ssh command for osd@%s:\n%s", m[1], out)
	}
	args := append([]string{"-o", "BatchMode=yes", "-o", "ConnectTimeout=10"}, strings.Fields(cmd[1])[1:]...)
	return func(script string) (string, error) {
		var b []byte
		var err error
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(3 * time.Second) {
			c := exec.Command("ssh", append(args, "sh -s")...)
			c.Stdin = strings.NewReader(script)
			b, err = c.CombinedOutput()
			if err == nil || time.Now().After(deadline) {
				return string(b), err
			}
		}
	}
}

// The LAN neighbour's link to the host: a /30 from the benchmarking range (RFC 2544),
// which no osd network uses.
const (
	lanNS       = "osd-e2e-lan"
	lanHostLink = "osde2elan0"
	lanHostAddr = "198.18.77.1"
	lanPeerAddr = "198.18.77.2"
)

// lanNeighbour makes a network namespace linked to the host by a veth, whose default route
// (so also 10.42.0.0/16, 10.43.0.0/16 and 172.24.4.0/24) goes through the host, as a
// neighbour on the LAN that routes the cloud's networks via the host would; it is deleted
// (with the veth) at cleanup.
func lanNeighbour(t *testing.T) string {
	t.Helper()
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	exec.Command("ip", "netns", "del", lanNS).Run() // a leftover of an interrupted run
	exec.Command("ip", "link", "del", lanHostLink).Run()
	run("ip", "netns", "add", lanNS)
	t.Cleanup(func() {
		exec.Command("ip", "netns", "del", lanNS).Run()
		exec.Command("ip", "link", "del", lanHostLink).Run()
	})
	run("ip", "link", "add", lanHostLink, "type", "veth", "peer", "name", "eth0", "netns", lanNS)
	run("ip", "addr", "add", lanHostAddr+"/30", "dev", lanHostLink)
	run("ip", "link", "set", lanHostLink, "up")
	run("ip", "-n", lanNS, "addr", "add", lanPeerAddr+"/30", "dev", "eth0")
	run("ip", "-n", lanNS, "link", "set", "eth0", "up")
	run("ip", "-n", lanNS, "link", "set", "lo", "up")
	run("ip", "-n", lanNS, "route", "add", "default", "via", lanHostAddr)
	return lanNS
}
