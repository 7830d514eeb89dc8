package cluster

import (
	"sort"
	"strings"
	"testing"
)

func TestRoleLabels(t *testing.T) {
	for _, tt := range []struct {
		roles   []string
		want    string
		wantErr bool
	}{
		{roles: []string{"compute"}, want: "openstack-compute-node openvswitch"},
		{roles: []string{"network"}, want: "openstack-gateway openvswitch"},
		{roles: []string{"control", "compute"}, want: "openstack-compute-node openstack-control-plane openvswitch"},
		{roles: ValidRoles, want: "openstack-compute-node openstack-control-plane openstack-gateway openstack-storage openvswitch"},
		{roles: []string{"gpu"}, wantErr: true},
	} {
		got, err := RoleLabels(tt.roles)
		if (err != nil) != tt.wantErr {
			t.Errorf("RoleLabels(%v) error = %v, want error %v", tt.roles, err, tt.wantErr)
			continue
		}
		var names []string
		for k, v := range got {
			if v != "enabled" {
				t.Errorf("RoleLabels(%v)[%s] = %q, want enabled", tt.roles, k, v)
			}
			if !strings.HasPrefix(k, RoleLabelPrefix) {
				t.Errorf("RoleLabels(%v) has %s, want every role label under %s (a kubelet cannot set those)", tt.roles, k, RoleLabelPrefix)
			}
			names = append(names, strings.TrimPrefix(k, RoleLabelPrefix))
		}
		sort.Strings(names)
		if !tt.wantErr && strings.Join(names, " ") != tt.want {
			t.Errorf("RoleLabels(%v) = %v, want %s", tt.roles, names, tt.want)
		}
	}
}
