package deployment

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/osdcloud/osd/daemon/deploy"
)

// The releases that keep their data in a hostPath on one node (databases, queues, the
// Glance file store, the OVN databases, Ceph's store) run only on that node: the node a
// release is first placed on is recorded in a ConfigMap and its chart gets it as its
// `node` value (a nodeSelector on the node's hostname). Without that, a restart could
// start them on another node, empty.

// StatefulReleases are the releases with hostPath state.
var StatefulReleases = []string{"mariadb", "rabbitmq", "glance", "ovn", "ceph"}

// placementMap is the ConfigMap (in kube-system) that records release -> node.
const placementMap = "osd-state-placement"

// Placement reads the recorded node of every stateful release placed so far.
func Placement(ctx context.Context, cs kubernetes.Interface) (map[string]string, error) {
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, placementMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the placement of stateful services: %w", err)
	}
	out := map[string]string{}
	for k, v := range cm.Data {
		out[k] = v
	}
	return out, nil
}

// StateHeld lists by node the stateful releases whose data that node holds, each list
// sorted (the placement recorded so far; members.Service refuses to remove such a node).
func (s *Service) StateHeld(ctx context.Context) (map[string][]string, error) {
	cs, err := s.st.Node.Admin()
	if err != nil {
		return nil, err
	}
	placement, err := Placement(ctx, cs)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, n := range placement {
		out[n] = HeldBy(placement, n)
	}
	return out, nil
}

// HeldBy lists the stateful releases recorded on node, sorted (pure).
func HeldBy(placement map[string]string, node string) []string {
	var out []string
	for rel, n := range placement {
		if n == node {
			out = append(out, rel)
		}
	}
	sort.Strings(out)
	return out
}

// ToPlace are the stateful releases spec enables that have no recorded node yet (pure).
func ToPlace(spec deploy.DeploymentSpec, placement map[string]string) []string {
	var out []string
	for _, svc := range deploy.DefaultCatalog().Services {
		if !spec.ServiceEnabled(svc) || placement[svc.Name] != "" {
			continue
		}
		for _, r := range StatefulReleases {
			if r == svc.Name {
				out = append(out, r)
			}
		}
	}
	return out
}

// Pin gives every recorded release its node as the chart's `node` value (pure; spec's
// service overrides are copied, not changed in place).
func Pin(spec deploy.DeploymentSpec, placement map[string]string) deploy.DeploymentSpec {
	services := make(map[string]deploy.ServiceSpec, len(spec.Services))
	for k, v := range spec.Services {
		services[k] = v
	}
	for rel, n := range placement {
		ss := services[rel]
		ov := make(map[string]any, len(ss.Overrides)+1)
		for k, v := range ss.Overrides {
			ov[k] = v
		}
		ov["node"] = n
		ss.Overrides = ov
		services[rel] = ss
	}
	spec.Services = services
	return spec
}

// ensurePlacement records a node for every stateful release spec enables that has none:
// the node its pod runs on now (a cloud deployed before placements were recorded), else
// this node, which holds the state dir its data goes to. It returns the whole record.
func (s *Service) ensurePlacement(ctx context.Context, cs kubernetes.Interface, spec deploy.DeploymentSpec) (map[string]string, error) {
	placement, err := Placement(ctx, cs)
	if err != nil {
		return nil, err
	}
	todo := ToPlace(spec, placement)
	if len(todo) == 0 {
		return placement, nil
	}
	for _, rel := range todo {
		node, err := runningOn(ctx, cs, rel)
		if err != nil {
			return nil, err
		}
		if node == "" {
			node = s.st.Cfg.NodeName
		}
		placement[rel] = node
		slog.Info("stateful service pinned to the node holding its data", "release", rel, "node", node)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: placementMap, Namespace: "kube-system",
		Labels: map[string]string{"app.kubernetes.io/managed-by": "osd"}}, Data: placement}
	_, err = cs.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cs.CoreV1().ConfigMaps("kube-system").Create(ctx, cm, metav1.CreateOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("record the placement of %s: %w", strings.Join(todo, ", "), err)
	}
	return placement, nil
}

// runningOn is the node a running pod of release's Deployments or StatefulSets is on (""
// when none runs): DaemonSet pods (ovn-controller) and Jobs hold no state.
func runningOn(ctx context.Context, cs kubernetes.Interface, release string) (string, error) {
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
	if err != nil {
		return "", fmt.Errorf("find the pods of %s: %w", release, err)
	}
	return StateNodeOf(pods.Items), nil
}

// StateNodeOf is the node of the first running pod of pods owned by a ReplicaSet or a
// StatefulSet ("" when there is none) (pure).
func StateNodeOf(pods []corev1.Pod) string {
	for _, p := range pods {
		owned := false
		for _, o := range p.OwnerReferences {
			owned = owned || o.Kind == "ReplicaSet" || o.Kind == "StatefulSet"
		}
		if owned && p.Spec.NodeName != "" && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			return p.Spec.NodeName
		}
	}
	return ""
}
