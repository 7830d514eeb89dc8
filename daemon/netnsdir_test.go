package daemon

import (
	"bufio"
	"sort"
	"strings"
	"testing"
)

func TestMountInfoHas(t *testing.T) {
	info := `27 1 0:25 / /run rw,nosuid - tmpfs tmpfs rw
503 27 254:0 /run/netns /run/netns rw,relatime shared:25 - ext4 /dev/vda rw
600 27 0:4 net:[1] /run/my\040dir rw - nsfs nsfs rw
`
	for _, tt := range []struct {
		path string
		want bool
	}{
		{"/run/netns", true},
		{"/run", true},
		{"/run/my dir", true},
		{"/run/net", false},
		{"/var/run/netns", false},
	} {
		got, err := mountInfoHas(bufio.NewScanner(strings.NewReader(info)), tt.path)
		if err != nil || got != tt.want {
			t.Errorf("mountInfoHas(%q) = %v, %v, want %v", tt.path, got, err, tt.want)
		}
	}
}

func TestRoleLabels(t *testing.T) {
	for _, tt := range []struct {
		roles   []string
		want    string
		wantErr bool
	}{
		{roles: []string{"compute"}, want: "openstack-compute-node openvswitch"},
		{roles: []string{"network"}, want: "openstack-gateway openvswitch"},
		{roles: []string{"control", "compute"}, want: "openstack-compute-node openstack-control-plane openvswitch"},
		{roles: allRoles, want: "openstack-compute-node openstack-control-plane openstack-gateway openstack-storage openvswitch"},
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
			names = append(names, k)
		}
		sort.Strings(names)
		if !tt.wantErr && strings.Join(names, " ") != tt.want {
			t.Errorf("RoleLabels(%v) = %v, want %s", tt.roles, names, tt.want)
		}
	}
}

func TestHiddenNetns(t *testing.T) {
	for _, tt := range []struct {
		name string
		ms   []mountEntry
		want bool
	}{
		{"no netns mount", []mountEntry{{"27", "1", "/run"}, {"44", "27", "/run/netns/cni-a"}}, false},
		{"pins on top mount", []mountEntry{{"27", "1", "/run"}, {"503", "27", "/run/netns"}, {"545", "503", "/run/netns/cni-a"}}, false},
		{"pin under stacked mount", []mountEntry{{"27", "1", "/run"}, {"44", "27", "/run/netns/cni-a"}, {"503", "27", "/run/netns"}, {"545", "503", "/run/netns/cni-b"}}, true},
		{"two stacked mounts", []mountEntry{{"27", "1", "/run"}, {"503", "27", "/run/netns"}, {"545", "503", "/run/netns/cni-a"}, {"600", "503", "/run/netns"}}, true},
	} {
		if got := hiddenNetns(tt.ms); got != tt.want {
			t.Errorf("hiddenNetns(%s) = %v, want %v", tt.name, got, tt.want)
		}
	}
}
