package api

import "time"

// Release states in DeploymentStatus.Children.
const (
	ReleasePending    = "pending"    // not acted on yet
	ReleaseWaiting    = "waiting"    // dependencies not ready
	ReleaseInstalling = "installing" // Helm action done, workloads not ready yet
	ReleaseReady      = "ready"
	ReleaseFailed     = "failed"
	// ReleaseUnavailable: the cluster reports the release ready, but its public endpoint
	// does not answer now (after a restart, before the services are really back).
	ReleaseUnavailable = "unavailable"
)

// DeploymentStatus is what GET /1.0/deployment answers: every Helm release and every
// workload, with the reason when it is not ready.
type DeploymentStatus struct {
	ObservedGeneration int64                     `json:"observedGeneration,omitempty"`
	Children           map[string]ChildStatus    `json:"children,omitempty"`
	Health             map[string]WorkloadHealth `json:"health,omitempty"` // key "Kind/namespace/name"
	Conditions         []Condition               `json:"conditions,omitempty"`
	// StateNodes is, for every release that keeps its data in a hostPath, the node holding
	// that data: its pods run only there.
	StateNodes map[string]string `json:"stateNodes,omitempty"`
}

// ChildStatus is one Helm release.
type ChildStatus struct {
	Chart      string `json:"chart,omitempty"`
	Version    string `json:"version,omitempty"`
	Revision   int    `json:"revision,omitempty"`
	ValuesHash string `json:"valuesHash,omitempty"`
	State      string `json:"state,omitempty"`
	Message    string `json:"message,omitempty"`
}

// WorkloadHealth is one Deployment, StatefulSet, DaemonSet or Job.
type WorkloadHealth struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Release   string `json:"release,omitempty"`
	Ready     int32  `json:"ready"`
	Desired   int32  `json:"desired"`
	Reason    string `json:"reason,omitempty"` // empty when ready
	Failed    bool   `json:"failed,omitempty"` // gave up (a Job past its backoff limit)
}

// Condition is one of the deployment's conditions (Ready, Progressing, Degraded).
type Condition struct {
	Type               string    `json:"type"`
	Status             string    `json:"status"`
	ObservedGeneration int64     `json:"observedGeneration,omitempty"`
	LastTransitionTime time.Time `json:"lastTransitionTime"`
	Reason             string    `json:"reason"`
	Message            string    `json:"message"`
}
