package deploy

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/osdcloud/osd/daemon/api"
)

// API coordinates of the OpenStackDeployment custom resource.
const (
	Group    = "deploy.osd.io"
	Version  = "v1alpha1"
	Kind     = "OpenStackDeployment"
	Resource = "openstackdeployments"
	// DefaultName is the one deployment osd manages (namespace Namespace).
	DefaultName = "default"
)

// GVR is the resource the dynamic client addresses.
var GVR = schema.GroupVersionResource{Group: Group, Version: Version, Resource: Resource}

// Profiles.
const (
	ProfileSingleNode = "single-node"
	ProfileHA         = "ha"
)

// OpenStackDeployment is the desired OpenStack of a cluster and where it stands.
type OpenStackDeployment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              DeploymentSpec   `json:"spec"`
	Status            DeploymentStatus `json:"status,omitempty"`
}

// DeploymentSpec is written by the daemon (osd init) and by users (osd config).
type DeploymentSpec struct {
	Profile string `json:"profile,omitempty"` // single-node (default) | ha
	// Release is the OpenStack release the images are of, by codename ("" in specs
	// written before osd recorded releases: zed); every chart gets it as openstackRelease.
	Release  string                 `json:"release,omitempty"`
	Features Features               `json:"features,omitempty"`
	Common   map[string]any         `json:"common,omitempty"`   // values merged into every release
	Services map[string]ServiceSpec `json:"services,omitempty"` // keyed by catalog service name
	Images   map[string]string      `json:"images,omitempty"`   // image name -> reference
}

// Features select backends.
type Features struct {
	Storage string `json:"storage,omitempty"` // ceph | lvm | file | none
	Network string `json:"network,omitempty"` // ovn
	TLS     bool   `json:"tls,omitempty"`
}

// Storage backends (Features.Storage): ceph is a single-node Ceph osd runs (RBD for
// Cinder and Glance), lvm the host's cinder-volumes volume group exported over iSCSI; file
// (the default) and none deploy no block storage.
const (
	StorageCeph = "ceph"
	StorageLVM  = "lvm"
)

// ServiceSpec enables/disables one service and overrides its values.
type ServiceSpec struct {
	Enabled   *bool          `json:"enabled,omitempty"`
	Overrides map[string]any `json:"overrides,omitempty"`
}

// Child states.
const (
	StatePending    = api.ReleasePending    // not acted on yet
	StateWaiting    = api.ReleaseWaiting    // dependencies not ready
	StateInstalling = api.ReleaseInstalling // Helm action done, workloads not ready yet
	StateReady      = api.ReleaseReady
	StateFailed     = api.ReleaseFailed
)

// DeploymentStatus is written by the controller only.
type DeploymentStatus struct {
	ObservedGeneration int64                     `json:"observedGeneration,omitempty"`
	Children           map[string]ChildStatus    `json:"children,omitempty"`
	Health             map[string]WorkloadHealth `json:"health,omitempty"` // key "Kind/namespace/name"
	Conditions         []metav1.Condition        `json:"conditions,omitempty"`
}

// ChildStatus is one Helm release (the API shows it as it is).
type ChildStatus = api.ChildStatus

// WorkloadHealth is one Deployment, StatefulSet, DaemonSet or Job (the API shows it as it is).
type WorkloadHealth = api.WorkloadHealth

// Condition types.
const (
	ConditionReady       = "Ready"
	ConditionProgressing = "Progressing"
	ConditionDegraded    = "Degraded"
)

// ServiceEnabled reports whether spec enables svc (its catalog default unless overridden).
func (s DeploymentSpec) ServiceEnabled(svc Service) bool {
	if ss, ok := s.Services[svc.Name]; ok && ss.Enabled != nil {
		return *ss.Enabled
	}
	return svc.Enabled
}
