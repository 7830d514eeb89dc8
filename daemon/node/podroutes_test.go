package node

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/cluster"
	"github.com/osdcloud/osd/netsetup"
)

func node(name, ip string, cidrs ...string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if ip != "" {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: ip}}
	}
	n.Spec.PodCIDRs = cidrs
	return n
}

func TestPodRoutes(t *testing.T) {
	legacy := node("n4", "10.0.0.4")
	legacy.Spec.PodCIDR = "10.42.3.0/24"
	for _, tt := range []struct {
		name  string
		nodes []corev1.Node
		want  []netsetup.PodRoute
	}{
		{"single node", []corev1.Node{node("n1", "10.0.0.1", "10.42.0.0/24")}, nil},
		{"two nodes", []corev1.Node{node("n2", "10.0.0.2", "10.42.1.0/24"), node("n1", "10.0.0.1", "10.42.0.0/24")},
			[]netsetup.PodRoute{{Dst: "10.42.1.0/24", Via: "10.0.0.2"}}},
		{"no pod CIDR yet", []corev1.Node{node("n1", "10.0.0.1", "10.42.0.0/24"), node("n2", "10.0.0.2")}, nil},
		{"no address yet", []corev1.Node{node("n1", "10.0.0.1", "10.42.0.0/24"), node("n2", "", "10.42.1.0/24")}, nil},
		{"IPv6 skipped, legacy podCIDR", []corev1.Node{node("n1", "10.0.0.1"), node("n3", "fd00::3", "fd42::/64"), legacy},
			[]netsetup.PodRoute{{Dst: "10.42.3.0/24", Via: "10.0.0.4"}}},
		{"sorted, normalized", []corev1.Node{node("n3", "10.0.0.3", "10.42.2.7/24"), node("n2", "10.0.0.2", "10.42.1.0/24")},
			[]netsetup.PodRoute{{Dst: "10.42.1.0/24", Via: "10.0.0.2"}, {Dst: "10.42.2.0/24", Via: "10.0.0.3"}}},
	} {
		if got := PodRoutes("n1", tt.nodes); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("PodRoutes(%s) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestSetTaint(t *testing.T) {
	a := corev1.Taint{Key: "a", Value: "1", Effect: corev1.TaintEffectNoSchedule}
	b := corev1.Taint{Key: "b", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	b2 := corev1.Taint{Key: "b", Value: "other", Effect: corev1.TaintEffectNoSchedule}
	for _, c := range []struct {
		name        string
		have        []corev1.Taint
		t           corev1.Taint
		on          bool
		want        []corev1.Taint
		wantChanged bool
	}{
		{"add", []corev1.Taint{a}, b, true, []corev1.Taint{a, b}, true},
		{"present", []corev1.Taint{a, b}, b, true, []corev1.Taint{a, b}, false},
		{"other value", []corev1.Taint{b2}, b, true, []corev1.Taint{b}, true},
		{"remove", []corev1.Taint{a, b}, b, false, []corev1.Taint{a}, true},
		{"absent", []corev1.Taint{a}, b, false, []corev1.Taint{a}, false},
	} {
		got, changed := SetTaint(c.have, c.t, c.on)
		if changed != c.wantChanged || len(got) != len(c.want) || (len(got) > 0 && !reflect.DeepEqual(got, c.want)) {
			t.Errorf("SetTaint(%s) = %v, %v, want %v, %v", c.name, got, changed, c.want, c.wantChanged)
		}
	}
}

// TestControlSources: only Nodes with every label of the control role count, with their
// addresses and pod CIDRs; a compute node's (its own kubelet cannot set those labels) and
// an unlabelled node's are left out.
func TestControlSources(t *testing.T) {
	labels, err := cluster.RoleLabels([]string{api.RoleControl})
	if err != nil {
		t.Fatal(err)
	}
	control := node("n1", "10.0.0.1", "10.42.0.0/24")
	control.Labels = labels
	control.Status.Addresses = append(control.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "fd00::1"})
	compute := node("n2", "10.0.0.2", "10.42.1.0/24")
	compute.Labels, _ = cluster.RoleLabels([]string{api.RoleCompute, api.RoleNetwork})
	partial := node("n3", "10.0.0.3", "10.42.2.0/24")
	partial.Labels = map[string]string{}
	for k := range labels {
		partial.Labels[k] = "disabled"
	}
	legacy := node("n4", "10.0.0.4")
	legacy.Labels = labels
	legacy.Spec.PodCIDR = "10.42.3.5/24"
	for _, tt := range []struct {
		name  string
		nodes []corev1.Node
		want  []string
	}{
		{"control only", []corev1.Node{compute, control, node("n5", "10.0.0.5", "10.42.4.0/24")}, []string{"10.0.0.1", "10.42.0.0/24", "fd00::1"}},
		{"a label with another value", []corev1.Node{partial}, nil},
		{"legacy pod CIDR normalised", []corev1.Node{legacy}, []string{"10.0.0.4", "10.42.3.0/24"}},
		{"no nodes", nil, nil},
	} {
		if got := ControlSources(tt.nodes); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ControlSources(%s) = %v, want %v", tt.name, got, tt.want)
		}
	}
}
