package converge

import (
	"reflect"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/api"
)

func sp(name string, start, end int) api.Span {
	return api.Span{Name: name, Start: time.Duration(start) * time.Second, Took: time.Duration(end-start) * time.Second}
}

func TestCriticalPath(t *testing.T) {
	steps := []api.Span{sp("preflight", 0, 1), sp("openvswitch", 1, 3), sp("kubernetes", 1, 20), sp("kubernetes-node", 20, 25),
		sp("node-roles", 25, 26), sp("image-build", 1, 300), sp("images", 300, 310), sp("openstack", 310, 500), sp("day-one", 500, 508),
		sp("external-network", 3, 4)}
	needs := map[string][]string{"kubernetes-node": {"kubernetes"}, "node-roles": {"kubernetes-node"}, "images": {"image-build", "kubernetes"},
		"openstack": {"images", "node-roles"}, "day-one": {"openstack", "external-network"}, "external-network": {"openvswitch"}}
	images := []api.ImageProfile{
		{Name: "base", Phases: []api.Span{sp("resolve", 1, 3), sp("download", 3, 10), sp("install", 10, 50), sp("pack", 50, 55)}},
		{Name: "openstack-common", Base: "base", Phases: []api.Span{sp("resolve", 1, 3), sp("download", 55, 56), sp("install", 56, 150), sp("pack", 150, 160)}},
		{Name: "openstack", Base: "openstack-common", Phases: []api.Span{sp("resolve", 1, 3), sp("install", 160, 290), sp("pack", 290, 299), sp("import", 299, 309)}},
		{Name: "compute", Base: "openstack-common", Phases: []api.Span{sp("resolve", 1, 3), sp("install", 160, 200), sp("import", 200, 205)}},
		{Name: "coredns", Cached: true, Phases: []api.Span{sp("resolve", 1, 2)}},
	}
	releases := []api.ReleaseProfile{
		{Name: "mariadb", Phases: []api.Span{sp("helm", 310, 311), sp("ready", 311, 330)}},
		{Name: "rabbitmq", Phases: []api.Span{sp("helm", 310, 311), sp("ready", 311, 340)}},
		{Name: "keystone", DependsOn: []string{"mariadb", "rabbitmq"}, Phases: []api.Span{sp("waiting", 310, 340), sp("helm", 340, 342), sp("jobs", 342, 400), sp("ready", 400, 410)}},
		{Name: "glance", DependsOn: []string{"keystone"}, Phases: []api.Span{sp("waiting", 310, 410), sp("helm", 410, 411), sp("ready", 411, 450)}},
		{Name: "placement", DependsOn: []string{"keystone"}, Phases: []api.Span{sp("waiting", 310, 410), sp("helm", 410, 411), sp("ready", 411, 499)}},
	}
	got := CriticalPath(steps, needs, images, releases)
	var names []string
	for _, s := range got {
		names = append(names, s.Name)
	}
	want := []string{"image base", "image openstack-common", "image openstack", "images", "release rabbitmq", "release keystone", "release placement", "day-one"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("CriticalPath() = %v, want %v", names, want)
	}
	if got[2] != sp("image openstack", 160, 299) || got[6] != sp("release placement", 410, 499) {
		t.Errorf("CriticalPath() spans %v, %v; want openstack's build 160-299 (import not in it), placement's helm to ready 410-499", got[2], got[6])
	}
	// Without the details, the steps themselves.
	got = CriticalPath(steps, needs, nil, nil)
	names = nil
	for _, s := range got {
		names = append(names, s.Name)
	}
	if want := []string{"image-build", "images", "openstack", "day-one"}; !reflect.DeepEqual(names, want) {
		t.Errorf("CriticalPath(no details) = %v, want %v", names, want)
	}
}

func TestStepSpans(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	s := newStepSpans(t0)
	s.done(api.Step{Step: "kubernetes", Took: 5 * time.Second}, t0.Add(8*time.Second))
	s.done(api.Step{Step: "images", Took: time.Second}, t0.Add(9*time.Second))
	s.done(api.Step{Step: "kubernetes", Took: 2 * time.Second}, t0.Add(20*time.Second)) // a retry
	want := []api.Span{sp("kubernetes", 18, 20), sp("images", 8, 9)}
	if got := s.list(); !reflect.DeepEqual(got, want) {
		t.Errorf("list() = %v, want %v", got, want)
	}
}
