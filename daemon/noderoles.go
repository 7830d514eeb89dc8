package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Node roles and the labels that place workloads: the charts select nodes by these labels
// (ovn-controller and the metadata agent on openvswitch=enabled, gateway chassis on
// openstack-gateway=enabled, nova-compute on openstack-compute-node=enabled).
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
			out[l] = "enabled"
		}
	}
	return out, nil
}

// labelNode is the converge step that gives this node the labels of its roles (a merge
// patch: other labels are kept). It changes nothing when they are already there.
func (d *Daemon) labelNode(ctx context.Context) (bool, string, error) {
	want, err := RoleLabels(allRoles)
	if err != nil {
		return false, "", err
	}
	kc, err := d.clients()
	if err != nil {
		return false, "", err
	}
	node, err := kc.kube.CoreV1().Nodes().Get(ctx, d.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return false, "", fmt.Errorf("read node %s: %w", d.cfg.NodeName, err)
	}
	missing := map[string]string{}
	for k, v := range want {
		if node.Labels[k] != v {
			missing[k] = v
		}
	}
	names := make([]string, 0, len(want))
	for k := range want {
		names = append(names, k)
	}
	sort.Strings(names)
	detail := "node " + d.cfg.NodeName + ": " + strings.Join(names, ", ")
	if len(missing) == 0 {
		return false, detail, nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": missing}})
	if err != nil {
		return false, "", err
	}
	if _, err := kc.kube.CoreV1().Nodes().Patch(ctx, d.cfg.NodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return false, "", fmt.Errorf("label node %s: %w", d.cfg.NodeName, err)
	}
	return true, detail, nil
}
