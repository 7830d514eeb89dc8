package k3s

import (
	"fmt"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// Defaults for the embedded cluster.
const (
	DefaultAPIPort     = 6443
	DefaultClusterCIDR = "10.42.0.0/16"
	DefaultServiceCIDR = "10.43.0.0/16"
	DefaultCNIBinDir   = "/usr/lib/cni"
	// PauseImage is the sandbox image k3s's kubelet and containerd expect; osd builds it.
	PauseImage = "docker.io/rancher/mirrored-pause:3.6"
	// BridgeName is the Linux bridge the CNI configuration creates for pods.
	BridgeName = "cni0"
)

// Paths is where the embedded cluster keeps its files: persistent state under StateDir,
// sockets and runtime state under RunDir; and where it keeps its processes: the kubelet
// puts pods under CgroupRoot/kubepods in every cgroup hierarchy.
type Paths struct {
	StateDir string
	RunDir   string
	// CgroupRoot is the kubelet's cgroup root ("" or "/": the hierarchy's root). Nodes
	// sharing one host (tests) each take their own, such as /osd-node2, so that no node's
	// cleanup can take another's pods for its own.
	CgroupRoot string
}

// PodsCgroup is the cgroup path under which the kubelet of p runs pods.
func (p Paths) PodsCgroup() string { return path.Join("/", p.CgroupRoot, "kubepods") }

func (p Paths) DataDir() string    { return filepath.Join(p.StateDir, "k3s") }
func (p Paths) Kubeconfig() string { return filepath.Join(p.StateDir, "kubeconfig") }

// AgentKubeconfig is the kubelet's kubeconfig an agent writes: the node's own
// credentials (it may read and update its own Node, not others).
func (p Paths) AgentKubeconfig() string {
	return filepath.Join(p.DataDir(), "agent", "kubelet.kubeconfig")
}
func (p Paths) BinDir() string           { return filepath.Join(p.StateDir, "bin") }
func (p Paths) LogDir() string           { return filepath.Join(p.StateDir, "logs") }
func (p Paths) ManifestsDir() string     { return filepath.Join(p.DataDir(), "server", "manifests") }
func (p Paths) ContainerdDir() string    { return filepath.Join(p.StateDir, "containerd") }
func (p Paths) ContainerdConfig() string { return filepath.Join(p.ContainerdDir(), "config.toml") }
func (p Paths) ContainerdRoot() string   { return filepath.Join(p.ContainerdDir(), "root") }
func (p Paths) ContainerdState() string  { return filepath.Join(p.RunDir, "containerd") }
func (p Paths) ContainerdSocket() string {
	return filepath.Join(p.ContainerdState(), "containerd.sock")
}
func (p Paths) CrictlConfig() string { return filepath.Join(p.StateDir, "crictl.yaml") }
func (p Paths) CNIConfDir() string   { return filepath.Join(p.StateDir, "cni", "net.d") }
func (p Paths) CNIConfFile() string {
	return filepath.Join(p.CNIConfDir(), "10-osd.conflist")
}

// Config is everything needed to start the embedded k3s server and its agent.
type Config struct {
	Paths
	NodeName    string
	NodeIP      string // empty: k3s picks the address of the default route
	APIPort     int
	ClusterCIDR string
	ServiceCIDR string
	CNIBinDir   string
	NodeLabels  []string // key=value
	NodeTaints  []string // key=value:Effect, set when the node registers
}

// WithDefaults fills the zero fields of c.
func (c Config) WithDefaults() Config {
	if c.APIPort == 0 {
		c.APIPort = DefaultAPIPort
	}
	if c.ClusterCIDR == "" {
		c.ClusterCIDR = DefaultClusterCIDR
	}
	if c.ServiceCIDR == "" {
		c.ServiceCIDR = DefaultServiceCIDR
	}
	if c.CNIBinDir == "" {
		c.CNIBinDir = DefaultCNIBinDir
	}
	return c
}

// disabledComponents are the k3s add-ons osd does not use: osd deploys its own CoreDNS
// and storage through Helm, runs Helm in-process, and provides networking itself.
var disabledComponents = []string{"traefik", "servicelb", "metrics-server", "local-storage", "coredns"}

// ServerArgs is the k3s server command line for c (without the program name).
func ServerArgs(c Config) ([]string, error) {
	c = c.WithDefaults()
	if c.StateDir == "" || c.RunDir == "" {
		return nil, fmt.Errorf("state dir and run dir are required")
	}
	if c.NodeName == "" {
		return nil, fmt.Errorf("node name is required")
	}
	args := []string{
		"server",
		"--data-dir", c.DataDir(),
		"--write-kubeconfig", c.Kubeconfig(),
		"--write-kubeconfig-mode", "0600",
		"--node-name", c.NodeName,
		"--https-listen-port", strconv.Itoa(c.APIPort),
		"--cluster-cidr", c.ClusterCIDR,
		"--service-cidr", c.ServiceCIDR,
		"--disable", strings.Join(disabledComponents, ","),
		"--disable-helm-controller",
		"--disable-network-policy",
		// Secrets (database passwords, fernet keys) encrypted in the datastore with a
		// key k3s makes at its first start with this flag (server/cred/encryption-config.json,
		// 0600); a datastore written before keeps its old Secrets readable (the identity
		// provider stays in the configuration) until they are written again.
		"--secrets-encryption",
		"--flannel-backend", "none",
		"--container-runtime-endpoint", "unix://" + c.ContainerdSocket(),
		"--pause-image", PauseImage,
		"--kubelet-arg", "cgroup-driver=cgroupfs",
	}
	return appendNodeArgs(args, c)
}

// AgentArgs is the k3s agent command line for c joining the server at serverURL (the
// supervisor, https://host:6443) with the node token: a node without the API server,
// scheduler, controllers or datastore; its kubelet registers with the server.
func AgentArgs(c Config, serverURL, token string) ([]string, error) {
	c = c.WithDefaults()
	if c.StateDir == "" || c.RunDir == "" {
		return nil, fmt.Errorf("state dir and run dir are required")
	}
	if c.NodeName == "" {
		return nil, fmt.Errorf("node name is required")
	}
	if !strings.HasPrefix(serverURL, "https://") {
		return nil, fmt.Errorf("k3s server URL %q: want https://host:port", serverURL)
	}
	if token == "" {
		return nil, fmt.Errorf("k3s node token is required to join %s", serverURL)
	}
	args := []string{
		"agent",
		"--data-dir", c.DataDir(),
		"--server", serverURL,
		"--token", token,
		"--node-name", c.NodeName,
		"--container-runtime-endpoint", "unix://" + c.ContainerdSocket(),
		"--pause-image", PauseImage,
		"--kubelet-arg", "cgroup-driver=cgroupfs",
	}
	args, err := appendNodeArgs(args, c)
	if err != nil {
		return nil, err
	}
	// The kubelet registers its Node with the join's digest: while the join is under
	// way, only that proves the Node is this agent's (NodeAdmissionPolicy). A label is
	// set at registration only, so a member's later restarts leave its Node alone.
	return append(args, "--node-label", JoinLabel+"="+JoinDigest(token)), nil
}

// EvictionHard is the kubelet's hard eviction thresholds. The kubelet's defaults are
// percentages (imagefs.available<15%, nodefs.available<10%) that on a large disk are tens
// of GB: a 250 GB disk with 37 GB free tainted the node with disk-pressure and no pod was
// scheduled, although the cloud needed 6. Evicting pods frees nothing that osd's services
// keep (their data is in hostPath volumes), so osd evicts only when the disk is truly
// nearly full; preflight refuses a host with too little free disk before that. Every
// signal is named: setting one drops the kubelet's default for the others.
const EvictionHard = "memory.available<100Mi,nodefs.available<1Gi,imagefs.available<1Gi,nodefs.inodesFree<5%,imagefs.inodesFree<5%"

// appendNodeArgs adds what server and agent share: node address, labels, cgroup root,
// eviction thresholds.
func appendNodeArgs(args []string, c Config) ([]string, error) {
	args = append(args, "--kubelet-arg", "eviction-hard="+EvictionHard)
	if c.NodeIP != "" {
		args = append(args, "--node-ip", c.NodeIP)
	}
	for _, l := range c.NodeLabels {
		if !strings.Contains(l, "=") {
			return nil, fmt.Errorf("node label %q: want key=value", l)
		}
		args = append(args, "--node-label", l)
	}
	for _, t := range c.NodeTaints {
		if !strings.Contains(t, ":") {
			return nil, fmt.Errorf("node taint %q: want key=value:Effect", t)
		}
		args = append(args, "--node-taint", t)
	}
	if root := path.Clean("/" + c.CgroupRoot); root != "/" {
		// A node sharing its host: its own cgroup root, and kube-proxy leaves the
		// host-wide conntrack table size alone.
		args = append(args, "--kubelet-arg", "cgroup-root="+root,
			"--kube-proxy-arg", "conntrack-max-per-core=0")
	}
	return args, nil
}
