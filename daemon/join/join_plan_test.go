package join

import (
	"slices"
	"testing"
)

// TestJoinNeeds: the joiner fetches the cluster's images only after the join completed
// (the cluster serves them to members, and its certificate is a member's only then; a
// fetch before it was refused "not trusted" and failed every join), after its host is
// prepared and its agent runs; every step it names exists.
func TestJoinNeeds(t *testing.T) {
	host := []string{"kvm-permissions", "openvswitch", "tunnel", "libvirt"}
	needs := JoinNeeds(host)
	if !slices.Equal(needs["kubernetes-agent"], host) {
		t.Errorf("kubernetes-agent needs %v, want the host steps %v", needs["kubernetes-agent"], host)
	}
	// after reports whether step runs after dep, following needs.
	var after func(step, dep string) bool
	after = func(step, dep string) bool {
		for _, n := range needs[step] {
			if n == dep || after(n, dep) {
				return true
			}
		}
		return false
	}
	for _, tc := range []struct{ step, dep string }{
		{"images", "cluster-member"}, {"images", "kubernetes-agent"}, {"images", "tunnel"},
		{"cluster-member", "kubernetes-node"}, {"kubernetes-node", "kubernetes-agent"},
	} {
		if !after(tc.step, tc.dep) {
			t.Errorf("%s does not wait for %s (needs %v)", tc.step, tc.dep, needs)
		}
	}
	if after("cluster-member", "images") {
		t.Errorf("cluster-member waits for the images, which the cluster serves only to members (needs %v)", needs)
	}
	for step, deps := range needs {
		for _, d := range deps {
			if _, ok := needs[d]; !ok && !slices.Contains(host, d) {
				t.Errorf("%s needs %s, which is no step", step, d)
			}
		}
	}
}
