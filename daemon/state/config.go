// Package state is what every resource package of the daemon is handed: the daemon's
// configuration, its state store with its keys in one typed place, the operations
// mechanism, the embedded Kubernetes node, and the hooks of the daemon's lifecycle. It
// holds no logic of its own beyond small accessors.
package state

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/osdcloud/osd/daemon/client"
	"github.com/osdcloud/osd/daemon/k3s"
	"github.com/osdcloud/osd/netsetup"
)

// Defaults for a host install.
const (
	DefaultStateDir = client.DefaultStateDir
	DefaultRunDir   = client.DefaultRunDir
	// DefaultCacheDir keeps built images and downloaded packages; osd reset leaves it,
	// so a host set up again does not rebuild what it had.
	DefaultCacheDir = "/var/cache/osd"
	// DefaultHTTPSAddress is where the remote API listens (mutual TLS for operators and
	// members; only the join routes are open, to callers holding a valid join token).
	DefaultHTTPSAddress = ":8443"
	// DefaultAgentTokenTTL is how long the credential a joining node's k3s agent
	// registers with stays valid: long enough for a join, dropped as soon as it completes.
	DefaultAgentTokenTTL = 15 * time.Minute
)

// Config is how a daemon is started.
type Config struct {
	StateDir string
	RunDir   string
	CacheDir string // image store and package cache
	Socket   string // default RunDir/osd.sock
	NodeName string // default the host name
	NodeIP   string
	// KeepWorkloads leaves pod containers running when the daemon stops.
	KeepWorkloads bool
	// Self is the osd executable (default os.Executable()).
	Self string
	// External is the external network behind br-ex (default: isolated and NATed).
	External netsetup.ExternalNetwork
	// VolumeGroupBytes sizes the loop-backed cinder-volumes group (default 20 GiB).
	VolumeGroupBytes int64
	// HTTPSAddress is the remote API's listen address (default :8443; "none" disables it).
	HTTPSAddress string
	// CgroupRoot is the kubelet's cgroup root (default: env OSD_CGROUP_ROOT, else the
	// hierarchy's root). Only for several nodes on one host, such as the cluster tests.
	CgroupRoot string
	// AgentTokenTTL is how long a joining node's k3s agent credential lives (default
	// DefaultAgentTokenTTL).
	AgentTokenTTL time.Duration
	// MemberCertLifetime is how long the member certificates this daemon issues last
	// (default cluster.MemberCertLifetime; members renew at half of it).
	MemberCertLifetime time.Duration
}

// WithDefaults fills the zero fields of c.
func (c Config) WithDefaults() (Config, error) {
	if c.StateDir == "" {
		c.StateDir = DefaultStateDir
	}
	if c.RunDir == "" {
		c.RunDir = DefaultRunDir
	}
	if c.CacheDir == "" {
		c.CacheDir = DefaultCacheDir
	}
	if c.Socket == "" {
		c.Socket = filepath.Join(c.RunDir, "osd.sock")
	}
	for _, p := range []*string{&c.StateDir, &c.RunDir, &c.CacheDir, &c.Socket} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return c, err
		}
		*p = abs
	}
	if c.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return c, fmt.Errorf("node name: %w", err)
		}
		c.NodeName = h
	}
	if c.HTTPSAddress == "" {
		c.HTTPSAddress = DefaultHTTPSAddress
	}
	if c.CgroupRoot == "" {
		c.CgroupRoot = os.Getenv("OSD_CGROUP_ROOT")
	}
	if c.VolumeGroupBytes == 0 {
		c.VolumeGroupBytes = 20 << 30
	}
	if c.AgentTokenTTL != 0 && (c.AgentTokenTTL < time.Minute || c.AgentTokenTTL > 24*time.Hour) {
		return c, fmt.Errorf("agent token lifetime %s is out of range, want between 1m and 24h", c.AgentTokenTTL)
	}
	if c.MemberCertLifetime != 0 && c.MemberCertLifetime < time.Minute {
		return c, fmt.Errorf("member certificate lifetime %s is too short, want at least 1m (members renew at half of it)", c.MemberCertLifetime)
	}
	if _, err := c.External.Normalize(); err != nil {
		return c, err
	}
	if c.Self == "" {
		self, err := os.Executable()
		if err != nil {
			return c, fmt.Errorf("find own executable: %w", err)
		}
		c.Self = self
	}
	return c, nil
}

// Paths is where the embedded Kubernetes of this config keeps its files.
func (c Config) Paths() k3s.Paths {
	return k3s.Paths{StateDir: c.StateDir, RunDir: c.RunDir, CgroupRoot: c.CgroupRoot}
}

// K3s is the embedded Kubernetes configuration of this config.
func (c Config) K3s() k3s.Config {
	return k3s.Config{Paths: c.Paths(), NodeName: c.NodeName, NodeIP: c.NodeIP}.WithDefaults()
}

// PublicIP is the address this node's services are reached at: the node IP, else the
// address of the default route.
func (c Config) PublicIP() string {
	if c.NodeIP != "" {
		return c.NodeIP
	}
	return DefaultRouteIP()
}

// DefaultRouteIP is the host address used to reach the default gateway (127.0.0.1 if none).
func DefaultRouteIP() string {
	conn, err := net.Dial("udp4", "192.0.2.1:9") // no packet is sent: UDP connect only picks a route
	if err != nil {
		return "127.0.0.1"
	}
	defer conn.Close()
	return conn.LocalAddr().(*net.UDPAddr).IP.String()
}

// CloudsPath and OpenRCPath are the admin credentials osd writes (0600).
func (c Config) CloudsPath() string { return filepath.Join(c.StateDir, "clouds.yaml") }
func (c Config) OpenRCPath() string { return filepath.Join(c.StateDir, "admin-openrc") }

// ClusterDir is where the cluster identity (CA, server certificate, membership) lives.
func (c Config) ClusterDir() string { return filepath.Join(c.StateDir, "cluster") }
