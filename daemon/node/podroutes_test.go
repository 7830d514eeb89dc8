package node

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
