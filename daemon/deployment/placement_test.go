package deployment

import (
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/osdcloud/osd/daemon/deploy"
)

func TestToPlaceAndPin(t *testing.T) {
	on := true
	spec := deploy.DeploymentSpec{Services: map[string]deploy.ServiceSpec{
		"mariadb": {Overrides: map[string]any{"persistence": map[string]any{"hostPath": "/s/volumes/mariadb"}}},
		"ceph":    {Enabled: &on},
	}}
	placement := map[string]string{"mariadb": "node1"}
	if got, want := ToPlace(spec, placement), []string{"rabbitmq", "ceph", "glance", "ovn"}; !slices.Equal(got, want) {
		t.Errorf("ToPlace() = %v, want %v (every enabled stateful release without a node, in catalog order)", got, want)
	}
	if got := ToPlace(deploy.DeploymentSpec{}, map[string]string{"mariadb": "a", "rabbitmq": "a", "glance": "a", "ovn": "a"}); len(got) != 0 {
		t.Errorf("ToPlace(all placed, ceph disabled) = %v, want none", got)
	}
	pinned := Pin(spec, map[string]string{"mariadb": "node1", "ovn": "node2"})
	if got := pinned.Services["mariadb"].Overrides; !reflect.DeepEqual(got, map[string]any{"persistence": map[string]any{"hostPath": "/s/volumes/mariadb"}, "node": "node1"}) {
		t.Errorf("Pin: mariadb overrides = %v, want its own and node node1", got)
	}
	if got := pinned.Services["ovn"].Overrides["node"]; got != "node2" {
		t.Errorf("Pin: ovn node = %v, want node2", got)
	}
	if _, ok := spec.Services["mariadb"].Overrides["node"]; ok {
		t.Error("Pin changed the spec it was given")
	}
}

func TestHeldBy(t *testing.T) {
	p := map[string]string{"mariadb": "n1", "rabbitmq": "n1", "ceph": "n2"}
	if got := HeldBy(p, "n1"); !slices.Equal(got, []string{"mariadb", "rabbitmq"}) {
		t.Errorf("HeldBy(n1) = %v, want mariadb, rabbitmq", got)
	}
	if got := HeldBy(p, "n3"); got != nil {
		t.Errorf("HeldBy(n3) = %v, want none", got)
	}
}

func TestStateNodeOf(t *testing.T) {
	pod := func(owner, node string, phase corev1.PodPhase) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{Kind: owner}}},
			Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
	}
	for _, c := range []struct {
		name string
		pods []corev1.Pod
		want string
	}{
		{"statefulset", []corev1.Pod{pod("StatefulSet", "n1", corev1.PodRunning)}, "n1"},
		{"daemonset pods hold nothing", []corev1.Pod{pod("DaemonSet", "n2", corev1.PodRunning), pod("ReplicaSet", "n1", corev1.PodRunning)}, "n1"},
		{"finished job", []corev1.Pod{pod("Job", "n2", corev1.PodSucceeded)}, ""},
		{"pending", []corev1.Pod{pod("ReplicaSet", "", corev1.PodPending)}, ""},
	} {
		if got := StateNodeOf(c.pods); got != c.want {
			t.Errorf("StateNodeOf(%s) = %q, want %q", c.name, got, c.want)
		}
	}
}
