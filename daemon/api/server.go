package api

import "time"

// Daemon states reported in ServerInfo.State.
const (
	StateStarting = "starting"
	StateRunning  = "running"
	StateStopping = "stopping"
)

// ServerInfo is what GET /1.0 returns: who the daemon is and how far it got.
type ServerInfo struct {
	Version   string    `json:"version"`
	State     string    `json:"state"`
	StateDir  string    `json:"state_dir"`
	Hostname  string    `json:"hostname,omitempty"`
	PID       int       `json:"pid,omitempty"`
	StartedAt time.Time `json:"started_at,omitzero"`
	Uptime    string    `json:"uptime"`
	// OpenStack is the OpenStack release the service images hold ("zed", "epoxy"), and
	// OpenStackTitle how status names it ("2025.1 Epoxy (Debian 13's packages)").
	OpenStack      string `json:"openstack,omitempty"`
	OpenStackTitle string `json:"openstack_title,omitempty"`
	// ReleaseUpgrade is the title of the newer release this osd deploys for new clouds
	// when the cloud runs an older one ("": none): a release upgrade is available and
	// not yet done (osd never moves a cloud between releases by itself).
	ReleaseUpgrade string           `json:"release_upgrade,omitempty"`
	Kubernetes     KubernetesStatus `json:"kubernetes"`
}

// KubernetesStatus is the state of the embedded Kubernetes as the daemon sees it.
type KubernetesStatus struct {
	APIReady  bool   `json:"api_ready"`
	NodeName  string `json:"node_name,omitempty"`
	NodeReady bool   `json:"node_ready"`
	// Reason says, in words, why the API or the node is not ready yet; empty when both are.
	Reason string `json:"reason,omitempty"`
}
