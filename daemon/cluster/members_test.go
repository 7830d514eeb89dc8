package cluster

import (
	"errors"
	"slices"
	"testing"
)

func TestRoleLabels(t *testing.T) {
	for _, c := range []struct {
		roles []string
		want  []string
	}{
		{[]string{"compute"}, []string{"openstack-compute-node=enabled", "openvswitch=enabled"}},
		{[]string{"network"}, []string{"openstack-gateway=enabled", "openvswitch=enabled"}},
		{[]string{"control"}, []string{"openstack-control-plane=enabled"}},
		{[]string{"storage"}, nil},
		{[]string{"compute", "network"}, []string{"openstack-compute-node=enabled", "openstack-gateway=enabled", "openvswitch=enabled"}},
		{ValidRoles, []string{"openstack-compute-node=enabled", "openstack-control-plane=enabled", "openstack-gateway=enabled", "openvswitch=enabled"}},
	} {
		if got := RoleLabels(c.roles); !slices.Equal(got, c.want) {
			t.Errorf("RoleLabels(%v) = %v, want %v", c.roles, got, c.want)
		}
	}
}

func TestNodeStateOf(t *testing.T) {
	states := map[string]string{"node1": NodeReady, "node2": NodeNotReady}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"node1", nil, NodeReady}, {"node2", nil, NodeNotReady}, {"node3", nil, NodeAbsent}, {"node1", errors.New("down"), NodeUnknown},
	} {
		if got := NodeStateOf(states, c.err, c.name); got != c.want {
			t.Errorf("NodeStateOf(%s, %v) = %s, want %s", c.name, c.err, got, c.want)
		}
	}
}
