package k3s

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
)

// ContainerdConfig renders containerd's configuration (version 3) for c. Notable choices:
// restrict_oom_score_adj because these hosts lack CAP_SYS_RESOURCE (without it every pod
// sandbox fails), cgroupfs to match the kubelet, Debian's CNI plugins, and the pause image
// osd builds itself pinned so containerd never tries to pull it.
func ContainerdConfig(c Config) string {
	c = c.WithDefaults()
	var b bytes.Buffer
	q := strconv.Quote
	fmt.Fprintf(&b, "# Written by osd; changes are overwritten when the daemon starts.\n")
	fmt.Fprintf(&b, "version = 3\nroot = %s\nstate = %s\n\n", q(c.ContainerdRoot()), q(c.ContainerdState()))
	fmt.Fprintf(&b, "[grpc]\n  address = %s\n\n", q(c.ContainerdSocket()))
	fmt.Fprintf(&b, "[plugins.'io.containerd.grpc.v1.cri']\n  stream_server_address = \"127.0.0.1\"\n  stream_server_port = \"10010\"\n\n")
	fmt.Fprintf(&b, "[plugins.'io.containerd.cri.v1.runtime']\n")
	fmt.Fprintf(&b, "  enable_selinux = false\n  enable_unprivileged_ports = true\n  enable_unprivileged_icmp = true\n")
	fmt.Fprintf(&b, "  restrict_oom_score_adj = true\n\n")
	fmt.Fprintf(&b, "[plugins.'io.containerd.cri.v1.runtime'.containerd]\n  default_runtime_name = \"runc\"\n\n")
	fmt.Fprintf(&b, "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n\n")
	fmt.Fprintf(&b, "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]\n  SystemdCgroup = false\n\n")
	fmt.Fprintf(&b, "[plugins.'io.containerd.cri.v1.runtime'.cni]\n  bin_dirs = [%s]\n  conf_dir = %s\n\n", q(c.CNIBinDir), q(c.CNIConfDir()))
	fmt.Fprintf(&b, "[plugins.'io.containerd.cri.v1.images']\n  snapshotter = \"overlayfs\"\n  disable_snapshot_annotations = true\n\n")
	fmt.Fprintf(&b, "[plugins.'io.containerd.cri.v1.images'.pinned_images]\n  sandbox = %s\n", q(PauseImage))
	return b.String()
}

// CNIConfig renders the pod network configuration for a node whose pod CIDR is podCIDR:
// a Linux bridge with the node's first address as gateway, host-local addresses, masquerade
// for traffic leaving the cluster, and port mappings.
func CNIConfig(podCIDR string) ([]byte, error) {
	prefix, err := netip.ParsePrefix(podCIDR)
	if err != nil {
		return nil, fmt.Errorf("pod cidr %q: %w", podCIDR, err)
	}
	if !prefix.Addr().Is4() || prefix.Bits() > 30 {
		return nil, fmt.Errorf("pod cidr %q: want an IPv4 prefix of /30 or larger", podCIDR)
	}
	prefix = prefix.Masked()
	gw := prefix.Addr().Next()
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "osd-pods",
		"plugins": []any{
			map[string]any{
				"type":         "bridge",
				"bridge":       BridgeName,
				"isGateway":    true,
				"ipMasq":       true,
				"hairpinMode":  true,
				"forceAddress": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": prefix.String(), "gateway": gw.String()}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": "/var/lib/cni/networks",
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}
