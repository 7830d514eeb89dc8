package images

import (
	"slices"
	"testing"
)

func TestNextImport(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pending []string
		want    []string // the whole order in which the importer takes them
	}{
		{"one", []string{"openstack"}, []string{"openstack"}},
		{"cached images queued as built: the small ones of the first releases first",
			[]string{"ceph", "openstack", "compute", "rabbitmq", "mariadb", "ovn", "memcached", "coredns"},
			[]string{"coredns", "mariadb", "memcached", "rabbitmq", "ovn", "openstack", "ceph", "compute"}},
		{"images it does not name come last, in queue order",
			[]string{"extra-b", "compute", "extra-a", "mariadb"},
			[]string{"mariadb", "compute", "extra-b", "extra-a"}},
		{"already in order", []string{"mariadb", "openstack"}, []string{"mariadb", "openstack"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := slices.Clone(tc.pending)
			var got []string
			for p := tc.pending; len(p) > 0; {
				var n string
				n, p = nextImport(p)
				got = append(got, n)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("order %v, want %v", got, tc.want)
			}
			if !slices.Equal(tc.pending, orig) {
				t.Errorf("nextImport changed its argument: %v", tc.pending)
			}
		})
	}
}

// Every image osd deploys has its place in importOrder: one it does not name would be
// imported after the compute image, the last one the critical path needs.
func TestImportOrderNamesEveryImage(t *testing.T) {
	for _, n := range append(slices.Clone(DeployImages), "ceph") {
		if !slices.Contains(importOrder, n) {
			t.Errorf("image %s is not in importOrder", n)
		}
	}
}
