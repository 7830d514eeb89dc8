package test

import (
	"fmt"
	"os/exec"
	"sort"
	"strings"
)

// serverNetDiagnostics is what a server without its DHCP lease needs to be understood,
// taken while the server still runs on node (in runs a command in that node's
// namespaces): its port as Neutron sees it (status, binding host, VIF type and details)
// and the OVN agents of the node; the port in the OVN northbound database (up, options
// such as requested-chassis, DHCP options) and southbound (the chassis it is bound to, the
// one it asked for, up); both databases; on the node, the tap's packet counters (does the
// guest send, does Open vSwitch answer), its Open vSwitch interface (ofport, error), the
// number of OpenFlow flows on br-int, a trace of a DHCP discover from the port (does it
// reach ovn-controller's DHCP responder), the datapath's flows; and the logs of the
// node's ovn-controller, nova-compute and metadata agent with ovn-controller's connection
// status.
func serverNetDiagnostics(n *node, in func(args ...string) *exec.Cmd, node, serverID string) string {
	d := &diagLog{n: n}
	b, run, osd, ovnDB := &d.b, d.run, d.osd, d.ovnDB
	out, _ := n.openstack("port", "list", "--server", serverID, "-f", "value", "-c", "ID", "-c", "MAC Address")
	portID, mac, _ := strings.Cut(strings.TrimSpace(strings.Split(strings.TrimSpace(out), "\n")[0]), " ")
	fmt.Fprintf(b, "server %s on %s: port %q, MAC %q\n", serverID, node, portID, mac)
	if portID == "" {
		return b.String() + out
	}
	out, err := n.openstack("port", "show", portID, "-f", "yaml", "-c", "status", "-c", "binding_host_id", "-c", "binding_vif_type", "-c", "binding_vif_details", "-c", "fixed_ips")
	fmt.Fprintf(b, "--- neutron port (%v)\n%s\n", err, tail(out, 40))
	out, err = n.openstack("network", "agent", "list", "--host", node)
	fmt.Fprintf(b, "--- neutron agents on %s (%v)\n%s\n", node, err, tail(out, 20))
	run("northbound port", ovnDB("ovn-nbctl", "nb", "--columns=name,up,addresses,port_security,options,dhcpv4_options", "find", "Logical_Switch_Port", "name="+portID), 20)
	run("southbound port binding", ovnDB("ovn-sbctl", "sb", "--columns=logical_port,chassis,requested_chassis,up,options,tunnel_key", "find", "Port_Binding", "logical_port="+portID), 20)
	run("ovn-sbctl show", ovnDB("ovn-sbctl", "sb", "show"), 60)
	run("chassis_private", ovnDB("ovn-sbctl", "sb", "--columns=name,nb_cfg,external_ids", "list", "Chassis_Private"), 30)
	run("ovn-nbctl show", ovnDB("ovn-nbctl", "nb", "show"), 60)

	tap := tapName(portID)
	run(node+" tap "+tap, in("ip", "-s", "link", "show", tap), 20)
	run(node+" ovs interface "+tap, in("ovs-vsctl", "--columns=name,ofport,error,admin_state,link_state,mtu,external_ids", "list", "Interface", tap), 20)
	run(node+" ovs-vsctl show", in("ovs-vsctl", "show"), 60)
	run(node+" OpenFlow flows on br-int", in("sh", "-c", "ovs-ofctl dump-flows br-int | grep -c ."), 2)
	run(node+" br-int port counters", in("ovs-ofctl", "dump-ports", "br-int"), 40)
	discover := fmt.Sprintf("udp,in_port=%s,dl_src=%s,dl_dst=ff:ff:ff:ff:ff:ff,nw_src=0.0.0.0,nw_dst=255.255.255.255,udp_src=68,udp_dst=67", tap, mac)
	run(node+" trace of a DHCP discover from the port", in("ovs-appctl", "ofproto/trace", "br-int", discover), 40)
	run(node+" datapath flows", in("ovs-appctl", "dpctl/dump-flows"), 40)

	pods, _ := n.kubectl("-n", "openstack", "get", "pods", "-o", "name", "--field-selector", "spec.nodeName="+node,
		"-l", "app.kubernetes.io/component in (controller,controller-gateway,compute,metadata-agent)")
	for _, pod := range strings.Fields(pods) {
		run("logs "+pod, osd("kubectl", "-n", "openstack", "logs", pod, "--all-containers", "--tail", "60"), 60)
		if strings.Contains(pod, "/ovn-controller") {
			run(pod+" connection-status", osd("kubectl", "-n", "openstack", "exec", pod, "--", "ovn-appctl", "-t", "ovn-controller", "connection-status"), 5)
		}
	}
	return b.String()
}

// tapName is the host interface Nova and os-vif name for a Neutron port: "tap" and the
// first 11 characters of its ID.
func tapName(portID string) string { return "tap" + portID[:min(11, len(portID))] }

// tunnelDiagnostics is what a ping that does not cross the Geneve tunnel between the
// nodes needs to be understood, taken from both nodes (each entry of nodes runs a command
// in that node's namespaces): the chassis and their encapsulations in OVN's southbound
// database; on each node its Open vSwitch bridges, its tunnel interfaces with their
// options, error and packet counters, the userspace datapath's own routing table, ARP
// cache and tunnel ports (native tunnelling does not use the kernel's), the counters of
// br-phy's ports and of the link under it, the kernel's addresses, routes and neighbours,
// and the datapath's flows (tnl_push on the way out, tnl_pop on the way in); then the
// state of target, the server the ping was for (its tap counters say whether the echo
// reached it and whether it answered).
func tunnelDiagnostics(n *node, nodes map[string]func(args ...string) *exec.Cmd, from, netns string, target guest, retry func() ([]byte, error)) string {
	d := &diagLog{n: n}
	b, run := &d.b, d.run
	run("chassis and encapsulations", d.ovnDB("ovn-sbctl", "sb", "--columns=chassis_name,type,ip,options", "list", "Encap"), 20)
	names := make([]string, 0, len(nodes))
	for name := range nodes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		in := nodes[name]
		run(name+" ovs-vsctl show", in("ovs-vsctl", "show"), 80)
		run(name+" tunnel interfaces", in("ovs-vsctl", "--columns=name,type,options,ofport,error,link_state,statistics", "find", "Interface", "type=geneve"), 30)
		run(name+" ovs/route/show", in("ovs-appctl", "ovs/route/show"), 30)
		run(name+" tnl/arp/show", in("ovs-appctl", "tnl/arp/show"), 20)
		run(name+" tnl/ports/show (IPv4)", in("sh", "-c", "ovs-appctl tnl/ports/show -v | grep -v ipv6"), 20)
		run(name+" br-phy port counters", in("ovs-ofctl", "dump-ports", "br-phy"), 30)
		run(name+" br-phy flows", in("ovs-ofctl", "dump-flows", "br-phy"), 20)
		run(name+" links", in("ip", "-s", "-br", "link"), 40)
		run(name+" addresses", in("ip", "-br", "addr"), 30)
		run(name+" routes", in("ip", "route"), 20)
		run(name+" neighbours", in("ip", "neigh"), 20)
		run(name+" datapath flows", in("ovs-appctl", "dpctl/dump-flows"), 60)
		run(name+" coverage (drops)", in("sh", "-c", "ovs-appctl coverage/show | grep -Ei 'drop|tnl|tunnel|csum'"), 40)
	}
	if in, ok := nodes[from]; ok {
		b.WriteString(traceFromMetadataPort(in, netns, from, target))
	}
	if retry != nil {
		b.WriteString(neighbourExperiment(nodes, target, retry))
	}
	if in, ok := nodes[target.host]; ok {
		b.WriteString(serverNetDiagnostics(n, in, target.host, target.id))
	}
	return b.String()
}

// traceFromMetadataPort traces an ICMP echo from the metadata port of node from (netns) to
// target through br-int: where the pipeline sends it, and, for a remote port, what the
// userspace datapath's native tunnelling decided (route, neighbour, tnl_push).
func traceFromMetadataPort(in func(args ...string) *exec.Cmd, netns, from string, target guest) string {
	// The namespace's end of the metadata port (tapXXXXXXXX-X1) has the port's MAC and
	// address; its peer on br-int ends in 0.
	out, err := in("ip", "netns", "exec", netns, "ip", "-o", "-4", "addr", "show").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("--- %s trace: metadata namespace addresses: %v\n%s\n", from, err, out)
	}
	var dev, ip string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && strings.HasPrefix(f[1], "tap") && !strings.HasPrefix(f[3], "169.254.") {
			dev, _, _ = strings.Cut(f[1], "@")
			ip, _, _ = strings.Cut(f[3], "/")
		}
	}
	mac, _ := in("ip", "netns", "exec", netns, "cat", "/sys/class/net/"+dev+"/address").CombinedOutput()
	// OVN's ARP responder answered the namespace for target (on either node).
	dstMAC, _ := in("sh", "-c", "ip netns exec "+netns+" ip neigh show "+target.ip+" | awk '{print $5}'").CombinedOutput()
	flow := fmt.Sprintf("icmp,in_port=%s0,dl_src=%s,dl_dst=%s,nw_src=%s,nw_dst=%s,nw_ttl=64,icmp_type=8,icmp_code=0",
		strings.TrimSuffix(dev, "1"), strings.TrimSpace(string(mac)), strings.TrimSpace(string(dstMAC)), ip, target.ip)
	out, err = in("ovs-appctl", "ofproto/trace", "br-int", flow).CombinedOutput()
	return fmt.Sprintf("--- %s trace of an ICMP echo from its metadata port to %s (%s) (%v)\n%s\n", from, target.ip, flow, err, tail(string(out), 60))
}

// neighbourExperiment sets each node's tunnel neighbour by hand (the peer's br-phy address
// and MAC in the userspace datapath's neighbour cache, which it otherwise learns by
// snooping ARP replies) and runs retry, the ping that failed: whether that alone makes the
// tunnel carry it tells where the fault is. The MACs come from netlink in each node's
// network namespace: /sys in node 2's mount namespace is the host's sysfs (an earlier
// version read node 1's MAC for both nodes there, and set node 1's own MAC as node 2's
// neighbour).
func neighbourExperiment(nodes map[string]func(args ...string) *exec.Cmd, target guest, retry func() ([]byte, error)) string {
	var b strings.Builder
	type phy struct{ ip, mac string }
	addrs := map[string]phy{}
	for name, in := range nodes {
		ip, _ := in("sh", "-c", "ip -o -4 addr show br-phy | awk '{print $4}' | cut -d/ -f1").CombinedOutput()
		mac, _ := in("sh", "-c", "ip -o link show br-phy | sed -n 's/.*link\\/ether \\([0-9a-f:]*\\).*/\\1/p'").CombinedOutput()
		addrs[name] = phy{strings.TrimSpace(string(ip)), strings.TrimSpace(string(mac))}
	}
	for name, in := range nodes {
		for peer, p := range addrs {
			if peer == name || p.ip == "" {
				continue
			}
			out, err := in("ovs-appctl", "tnl/neigh/set", "br-phy", p.ip, p.mac).CombinedOutput()
			fmt.Fprintf(&b, "--- experiment: %s tnl/neigh/set br-phy %s %s (%v) %s\n", name, p.ip, p.mac, err, strings.TrimSpace(string(out)))
		}
	}
	out, err := retry()
	fmt.Fprintf(&b, "--- experiment: the ping to %s again with the neighbours set by hand (%v)\n%s\n", target.name, err, tail(string(out), 5))
	return b.String()
}

// diagLog collects what the diagnostics' commands print, each under a heading.
type diagLog struct {
	n *node
	b strings.Builder
}

// run runs cmd and adds the last lines of its output under what, with its error.
func (d *diagLog) run(what string, cmd *exec.Cmd, lines int) {
	out, err := cmd.CombinedOutput()
	fmt.Fprintf(&d.b, "--- %s (%v)\n%s\n", what, err, tail(string(out), lines))
}

// osd is the CLI of the cloud's node.
func (d *diagLog) osd(args ...string) *exec.Cmd {
	return exec.Command(d.n.bin, append(d.n.globalArgs(), args...)...)
}

// ovnDB runs tool (ovn-nbctl or ovn-sbctl) against OVN's db ("nb" or "sb") in ovn-central.
func (d *diagLog) ovnDB(tool, db string, args ...string) *exec.Cmd {
	return d.osd(append([]string{"kubectl", "-n", "openstack", "exec", "deploy/ovn-central", "-c", "northd", "--", tool, "--db=unix:/run/ovn/ovn" + db + "_db.sock"}, args...)...)
}
