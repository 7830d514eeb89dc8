package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// RoleLabelPrefix is where role labels live: a kubelet may not set labels under
// node-restriction.kubernetes.io/ on its own Node (the NodeRestriction admission plugin),
// so a node cannot give itself roles (and with them the workloads and secrets of a
// role); osd gives them, with the cluster's admin credentials, from the join token.
const RoleLabelPrefix = "node-restriction.kubernetes.io/"

// Node roles and the labels that place workloads (each under RoleLabelPrefix): the charts
// select nodes by these labels (ovn-controller and the metadata agent on openvswitch,
// gateway chassis on openstack-gateway, nova-compute on openstack-compute-node, each
// =enabled).
var roleLabels = map[string][]string{
	"control": {"openstack-control-plane"},
	"compute": {"openstack-compute-node", "openvswitch"},
	"network": {"openvswitch", "openstack-gateway"},
	"storage": {"openstack-storage"},
}

// allRoles are the roles of the node `osd init` makes: a single node is everything.
var allRoles = []string{"control", "compute", "network", "storage"}

// RoleLabels is the set of node labels (name -> "enabled") for roles; unknown roles are an error.
func RoleLabels(roles []string) (map[string]string, error) {
	out := map[string]string{}
	for _, r := range roles {
		ls, ok := roleLabels[r]
		if !ok {
			known := make([]string, 0, len(roleLabels))
			for k := range roleLabels {
				known = append(known, k)
			}
			sort.Strings(known)
			return nil, fmt.Errorf("unknown role %q (roles: %s)", r, strings.Join(known, ", "))
		}
		for _, l := range ls {
			out[RoleLabelPrefix+l] = "enabled"
		}
	}
	return out, nil
}

// labelNode is the converge step that gives this node the labels of its roles (a merge
// patch: other labels are kept). It changes nothing when they are already there.
func (d *Daemon) labelNode(ctx context.Context) (bool, string, error) {
	kc, err := d.clients()
	if err != nil {
		return false, "", err
	}
	return labelNodeRoles(ctx, kc.kube, d.cfg.NodeName, allRoles)
}

// labelNodeRoles gives node the labels of roles (a merge patch: other labels are kept)
// and reports whether it changed anything.
func labelNodeRoles(ctx context.Context, cs kubernetes.Interface, node string, roles []string) (bool, string, error) {
	want, err := RoleLabels(roles)
	if err != nil {
		return false, "", err
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return false, "", fmt.Errorf("read node %s: %w", node, err)
	}
	missing := map[string]string{}
	for k, v := range want {
		if n.Labels[k] != v {
			missing[k] = v
		}
	}
	names := make([]string, 0, len(want))
	for k := range want {
		names = append(names, strings.TrimPrefix(k, RoleLabelPrefix))
	}
	sort.Strings(names)
	detail := "node " + node + ": " + strings.Join(names, ", ")
	if len(missing) == 0 {
		return false, detail, nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": missing}})
	if err != nil {
		return false, "", err
	}
	if _, err := cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return false, "", fmt.Errorf("label node %s: %w", node, err)
	}
	return true, detail, nil
}
