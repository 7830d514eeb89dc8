package cluster

import (
	"fmt"
	"sort"
	"strings"

	"github.com/osdcloud/osd/daemon/api"
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
	api.RoleControl: {"openstack-control-plane"},
	api.RoleCompute: {"openstack-compute-node", "openvswitch"},
	api.RoleNetwork: {"openvswitch", "openstack-gateway"},
	api.RoleStorage: {"openstack-storage"},
}

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

// NoControlPlaneTaint is the taint (effect NoSchedule) of nodes without the control role:
// only the workloads of their roles, which tolerate it, run there (the DaemonSets of
// ovn-controller, the metadata agent and nova-compute), so such a node needs only the
// images of its roles and never receives the control plane's pods and secrets.
const NoControlPlaneTaint = "osd.cloud/no-control-plane"

// WantsNoControlPlaneTaint reports whether a node with roles carries NoControlPlaneTaint (pure).
func WantsNoControlPlaneTaint(roles []string) bool {
	for _, r := range roles {
		if r == api.RoleControl {
			return false
		}
	}
	return true
}
