package images

import (
	"slices"
	"testing"
)

func TestRoleImages(t *testing.T) {
	for _, c := range []struct {
		roles []string
		want  []string
	}{
		{[]string{"compute"}, []string{"compute", "openstack", "ovn"}},
		{[]string{"network"}, []string{"openstack", "ovn"}},
		{[]string{"compute", "network"}, []string{"compute", "openstack", "ovn"}},
		{[]string{"storage"}, []string{"openstack"}}, // Ceph is not deployed by default
		{[]string{"control"}, []string{"compute", "coredns", "mariadb", "memcached", "openstack", "ovn", "rabbitmq"}},
		{nil, nil},
	} {
		if got := RoleImages(c.roles); !slices.Equal(got, c.want) {
			t.Errorf("RoleImages(%v) = %v, want %v", c.roles, got, c.want)
		}
	}
}

func TestImagesState(t *testing.T) {
	want := map[string]string{"ovn": "sha256:a", "compute": "sha256:b", "openstack": "sha256:c"}
	for _, c := range []struct {
		name string
		held map[string]string
		want string
	}{
		{"all held", map[string]string{"ovn": "sha256:a", "compute": "sha256:b", "openstack": "sha256:c", "extra": "sha256:x"}, "current"},
		{"nothing held", map[string]string{}, "missing compute,openstack,ovn"},
		{"one old, one missing", map[string]string{"ovn": "sha256:old", "compute": "sha256:b", "openstack": ""}, "missing openstack; outdated ovn"},
	} {
		if got := ImagesState(want, c.held); got != c.want {
			t.Errorf("ImagesState(%s) = %q, want %q", c.name, got, c.want)
		}
	}
}
