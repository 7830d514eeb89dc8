package api

import "time"

// InitRequest is the body of POST /1.0/init.
type InitRequest struct {
	// KubernetesOnly stops after the embedded Kubernetes node is Ready (no OpenStack).
	KubernetesOnly bool `json:"kubernetes_only,omitempty"`
	// ExternalInterface moves this host NIC into br-ex (guarded by a connectivity check
	// that rolls back) instead of the default isolated, NATed external network.
	ExternalInterface string `json:"external_interface,omitempty"`
	// ExternalCIDR is the isolated external network (default 172.24.4.0/24).
	ExternalCIDR string `json:"external_cidr,omitempty"`
	// TunnelInterface is where this node's Geneve endpoint lives: on the userspace OVS
	// datapath this interface moves into the bridge br-phy (its addresses with it, rolled
	// back if the host loses connectivity) so that tunnels to other nodes work; "auto" is
	// the interface holding the node's address; "none" takes the bridge away again. Empty
	// keeps what an earlier osd init chose (at first: none, the node's address).
	TunnelInterface string `json:"tunnel_interface,omitempty"`
	// StorageBackend is StorageCeph, StorageLVM or StorageNone ("": the host probe's
	// choice); it cannot change after the first init.
	StorageBackend string `json:"storage_backend,omitempty"`
	// StorageSize is the size in bytes of Ceph's OSD file or of the LVM volume group (0:
	// from the free disk). At least MinStorageBytes; it can grow, never shrink.
	StorageSize int64 `json:"storage_size_bytes,omitempty"`
	// Release is the OpenStack release of a new cloud, by codename or series ("": the
	// default release, or the one the cloud runs). A cloud keeps the release it was
	// deployed with: asking for another one is refused (409).
	Release string `json:"release,omitempty"`
}

// Converge states.
const (
	ConvergeIdle      = "idle"
	ConvergeRunning   = "running"
	ConvergeSucceeded = "succeeded"
	ConvergeFailed    = "failed"
)

// InitState is the progress of the current (or last) converge run, as GET /1.0/init
// answers it.
type InitState struct {
	State     string     `json:"state"` // idle, running, succeeded, failed
	Run       string     `json:"run,omitempty"`
	Operation string     `json:"operation,omitempty"` // the run's operation (GET /1.0/operations/{id})
	Started   time.Time  `json:"started,omitzero"`
	Finished  time.Time  `json:"finished,omitzero"`
	Steps     []Step     `json:"steps,omitempty"`
	Detail    string     `json:"detail,omitempty"` // what the running step is doing now, one item a line (e.g. a release each)
	Error     string     `json:"error,omitempty"`
	Findings  []Finding  `json:"findings,omitempty"`
	Decision  *Decisions `json:"decisions,omitempty"`
	// Dashboard is Horizon's address once the cloud is up (login: the admin credentials).
	Dashboard string `json:"dashboard,omitempty"`
	// Profile is where the run's time went, once it ended.
	Profile *Profile `json:"profile,omitempty"`
}

// Profile is where the time of a converge run went: each step, each image (resolve,
// download, install, customize, pack, store, import) and each release (waiting for its
// dependencies, Helm, pods scheduled, containers started, init Jobs, ready), as spans
// from the run's start, and the chain of them that set the run's length.
type Profile struct {
	Steps        []Span           `json:"steps"`
	Images       []ImageProfile   `json:"images,omitempty"`
	Releases     []ReleaseProfile `json:"releases,omitempty"`
	CriticalPath []Span           `json:"critical_path,omitempty"`
}

// Span is a named stretch of a run: from Start (after the run's start) for Took.
type Span struct {
	Name  string        `json:"name"`
	Start time.Duration `json:"start"`
	Took  time.Duration `json:"took"`
}

// End is when the span ended, from the run's start.
func (s Span) End() time.Duration { return s.Start + s.Took }

// ImageProfile is one image of a run: its build's phases (only resolve when the cache
// held it) and its import into containerd.
type ImageProfile struct {
	Name   string `json:"name"`
	Base   string `json:"base,omitempty"` // the image it is layered on
	Cached bool   `json:"cached"`
	Phases []Span `json:"phases"`
}

// ReleaseProfile is one Helm release of a run, its phases in the order they ended
// (none when the run did not touch it).
type ReleaseProfile struct {
	Name      string   `json:"name"`
	DependsOn []string `json:"depends_on,omitempty"`
	Phases    []Span   `json:"phases"`
}

// Step is one attempt of a step of a converge or join run: started (Done false) or
// finished. A failed attempt that will be tried again says when (RetryIn).
type Step struct {
	Step    string        `json:"step"`
	Index   int           `json:"index"`
	Total   int           `json:"total"`
	Attempt int           `json:"attempt,omitempty"` // 1 for the first
	Done    bool          `json:"done"`
	Changed bool          `json:"changed"`
	Detail  string        `json:"detail,omitempty"`
	Error   string        `json:"error,omitempty"`
	Took    time.Duration `json:"took"`
	RetryIn time.Duration `json:"retry_in,omitempty"` // a failed attempt: the next one in this long
}

// Finding statuses.
const (
	FindingOK   = "ok"
	FindingWarn = "warn"
	FindingFail = "fail"
)

// Finding is one preflight check's outcome, with the fix when it is not ok.
type Finding struct {
	Check   string `json:"check"`
	Status  string `json:"status"` // ok, warn, fail
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

// Decisions are what preflight chose for this host, each with its reason.
type Decisions struct {
	VirtType             string `json:"virt_type"` // kvm | qemu
	VirtTypeReason       string `json:"virt_type_reason"`
	OVSDatapath          string `json:"ovs_datapath"` // system | netdev
	OVSDatapathReason    string `json:"ovs_datapath_reason"`
	StorageBackend       string `json:"storage_backend"`
	StorageBackendReason string `json:"storage_backend_reason"`
}

// PreflightReport is what GET /1.0/preflight answers: the probed facts, the decisions and
// the findings, and whether any failed.
type PreflightReport struct {
	Facts     map[string]any `json:"facts"`
	Decisions Decisions      `json:"decisions"`
	Findings  []Finding      `json:"findings"`
	Failed    bool           `json:"failed"`
}
