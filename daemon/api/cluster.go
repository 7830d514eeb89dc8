package api

import "time"

// Roles a member can take.
const (
	RoleCompute = "compute"
	RoleControl = "control"
	RoleNetwork = "network"
	RoleStorage = "storage"
)

// DefaultJoinRoles are the roles of a joining node when its token names none.
var DefaultJoinRoles = []string{RoleCompute, RoleNetwork}

// Token states.
const (
	TokenPending  = "pending"
	TokenExpired  = "expired"
	TokenConsumed = "consumed"
	TokenRevoked  = "revoked"
)

// Kubernetes node states a member listing shows.
const (
	NodeReady    = "Ready"
	NodeNotReady = "NotReady"
	NodeAbsent   = "absent"  // no such node in the cluster's Kubernetes
	NodeUnknown  = "unknown" // the cluster's Kubernetes could not be asked
)

// TokenRequest is the body of POST /1.0/cluster/tokens.
type TokenRequest struct {
	Name  string   `json:"name"`
	Roles []string `json:"roles,omitempty"` // the joining node's roles (empty: DefaultJoinRoles)
	TTL   string   `json:"ttl,omitempty"`   // Go duration, e.g. "1h"; empty: one hour
}

// IssuedToken is the answer to POST /1.0/cluster/tokens: the encoded token is shown once.
type IssuedToken struct {
	Name    string    `json:"name"`
	Roles   []string  `json:"roles"`
	Token   string    `json:"token"`
	Expires time.Time `json:"expires"`
}

// TokenInfo describes an issued token without its secret (which is never stored).
type TokenInfo struct {
	Name      string    `json:"name"`
	Roles     []string  `json:"roles"`
	State     string    `json:"state"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// TrustRequest is the body of POST /1.0/trust.
type TrustRequest struct {
	Name        string `json:"name"`
	Certificate string `json:"certificate"` // PEM
}

// TrustEntry is a trusted certificate as the API lists it.
type TrustEntry struct {
	Fingerprint string    `json:"fingerprint"`
	Name        string    `json:"name"`
	Kind        string    `json:"kind"`
	AddedAt     time.Time `json:"added_at"`
}

// Member is a member of the cluster as the API shows it.
type Member struct {
	Name          string     `json:"name"`
	Address       string     `json:"address"`
	Fingerprint   string     `json:"fingerprint"`
	Roles         []string   `json:"roles"`
	JoinedAt      time.Time  `json:"joined_at"`
	LastHeartbeat *time.Time `json:"last_heartbeat,omitempty"`
	// Hostname is the member host's OS hostname as it joined ("" when its joiner sent
	// none): OpenStack names the host's hypervisor by it.
	Hostname string `json:"hostname,omitempty"`
	// NodeState is the member's Kubernetes node as the cluster sees it: Ready, NotReady,
	// absent or unknown (set by listings).
	NodeState string `json:"node_state,omitempty"`
	// Version is the member's osd version from its last heartbeat ("" until one arrives).
	Version string `json:"version,omitempty"`
	// Local marks the daemon that answered (the node that ran osd init).
	Local bool `json:"local,omitempty"`
	// Maintenance is set while osd cluster maintenance NAME on holds: the node's
	// nova-compute is disabled and its Kubernetes node cordoned.
	Maintenance bool `json:"maintenance,omitempty"`
	// Tunnel is the Geneve endpoint the node's OVN chassis registered ("geneve 10.0.0.2"),
	// "" while it has no chassis.
	Tunnel string `json:"tunnel,omitempty"`
	// HeldImages are the service images the node holds in containerd, by name (digests,
	// from its last heartbeat; the answering node's own, read now).
	HeldImages map[string]string `json:"held_images,omitempty"`
	// Images says whether the node holds the images its roles run at the digests the
	// cluster serves: "current", or what is missing or outdated.
	Images string `json:"images,omitempty"`
	// State lists the stateful services whose data lives on this node (they are pinned
	// to it; a node holding state cannot be removed).
	State []string `json:"state,omitempty"`
}

// MaintenanceRequest is the body of PUT /1.0/cluster/members/{name}/maintenance.
type MaintenanceRequest struct {
	// Enabled on: no new servers on the node (its nova-compute disabled) and no new pods
	// (cordoned); off undoes both.
	Enabled bool `json:"enabled"`
}

// JoinRequest is what a joining node sends to POST /1.0/cluster/join (to receive its
// credentials) and again to POST /1.0/cluster/join/complete (to register, once its k3s
// agent has joined), proving the token by name and secret. The node's roles are not
// its to choose: they come with the token.
type JoinRequest struct {
	Name    string `json:"name"`
	Secret  string `json:"secret"`
	Address string `json:"address"` // host:port of the joiner's own HTTPS API
	// CSR is a PEM certificate request for the member's client certificate (join only):
	// its private key never leaves the joining node.
	CSR string `json:"csr,omitempty"`
	// Hostname is the joining host's OS hostname, which OpenStack names its hypervisor
	// by: the cluster refuses one that another node has (409). Empty from joiners that
	// predate it (nothing is checked or recorded then).
	Hostname string `json:"hostname,omitempty"`
}

// JoinResponse carries what the joiner needs: its member certificate (client use only,
// towards the cluster's HTTPS API), the cluster CA, the roles its token gives it, and a
// credential with which its embedded k3s agent registers this one node, valid only until
// K3sTokenExpires and dropped as soon as the join completes. No secret that outlives the
// join, and nothing that would let the joiner act as a server, is in it.
type JoinResponse struct {
	MemberCertPEM   string    `json:"member_cert_pem"`
	CACertPEM       string    `json:"ca_cert_pem"`
	Roles           []string  `json:"roles"`
	K3sServerURL    string    `json:"k3s_server_url"`
	K3sToken        string    `json:"k3s_token"`
	K3sTokenExpires time.Time `json:"k3s_token_expires"`
	// Release is the OpenStack release the cloud runs, by codename ("" from a cluster of
	// an osd from before releases were recorded: zed).
	Release string `json:"release,omitempty"`
}

// HeartbeatRequest is the optional body of POST /1.0/cluster/members/{name}/heartbeat.
type HeartbeatRequest struct {
	Version string `json:"version,omitempty"` // the member's osd version
	// Images are the service images the member holds in containerd, by name (digests).
	Images map[string]string `json:"images,omitempty"`
}

// RenewRequest is the body of POST /1.0/cluster/members/{name}/certificate.
type RenewRequest struct {
	CSR string `json:"csr"` // PEM certificate request for the member's new key
}

// RenewResponse is its answer: the new member certificate.
type RenewResponse struct {
	CertificatePEM string    `json:"certificate_pem"`
	Expires        time.Time `json:"expires"`
}

// ChassisCertRequest is the body of POST /1.0/cluster/members/{name}/ovn-chassis: sign
// the member's OVN chassis certificate (common name: its Open vSwitch system-id).
type ChassisCertRequest struct {
	SystemID string `json:"system_id"`
	CSR      string `json:"csr"` // PEM certificate request for a key made on the member
}

// ChassisCertResponse is its answer: the certificate and the OVN CA.
type ChassisCertResponse struct {
	CertificatePEM string `json:"certificate_pem"`
	CAPEM          string `json:"ca_pem"`
}

// JoinRemoteRequest is the body of POST /1.0/cluster/join-remote: join the cluster the
// token names. The node's roles come with the token (osd cluster add NAME --role ...);
// Roles, if given, must be the token's.
type JoinRemoteRequest struct {
	Token string   `json:"token"`
	Roles []string `json:"roles,omitempty"`
	// TunnelInterface is where this node's Geneve endpoint lives (see InitRequest); empty
	// for a compute or network node: "auto", the interface holding the node's address.
	TunnelInterface string `json:"tunnel_interface,omitempty"`
}

// JoinStatus is what GET /1.0/cluster/join-remote answers (and POST when there is nothing
// left to do): how far this node's join is.
type JoinStatus struct {
	State     string   `json:"state"` // none, joining, member, removed
	Name      string   `json:"name,omitempty"`
	Roles     []string `json:"roles,omitempty"`
	Server    string   `json:"server,omitempty"` // the member that let this node in
	Operation string   `json:"operation,omitempty"`
	Error     string   `json:"error,omitempty"` // the last attempt's failure
	// HeartbeatError is why the last heartbeat to the cluster failed ("" when it went
	// through): a member whose heartbeats fail is still one until the cluster says not.
	HeartbeatError string `json:"heartbeat_error,omitempty"`
}
