package members

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/osdcloud/osd/daemon/openstack"
	"github.com/osdcloud/osd/daemon/rest"
)

func TestDrainTargets(t *testing.T) {
	pod := func(name string, phase corev1.PodPhase, owner string, mirror bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{Phase: phase}}
		if owner != "" {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: owner, Name: "x"}}
		}
		if mirror {
			p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
		}
		return p
	}
	pods := []corev1.Pod{
		pod("api", corev1.PodRunning, "ReplicaSet", false),
		pod("agent", corev1.PodRunning, "DaemonSet", false),
		pod("static", corev1.PodRunning, "", true),
		pod("job-done", corev1.PodSucceeded, "Job", false),
		pod("failed", corev1.PodFailed, "", false),
		pod("bare", corev1.PodPending, "", false),
	}
	var got []string
	for _, p := range DrainTargets(pods) {
		got = append(got, p.Name)
	}
	if want := []string{"api", "bare"}; !slices.Equal(got, want) {
		t.Errorf("DrainTargets() = %v, want %v", got, want)
	}
}

func TestServersOnHost(t *testing.T) {
	servers := []openstack.Server{
		{Name: "a", Host: "node2", Status: "ACTIVE"},
		{Name: "b", Host: "node2", Status: "SHUTOFF"},
		{Name: "c", Host: "node2", Status: "DELETED"},
		{Name: "d", Host: "node1", Status: "ACTIVE"},
		{Name: "e", Host: "", Status: "BUILD"},
	}
	for _, c := range []struct {
		host string
		want int
	}{{"node2", 2}, {"node1", 1}, {"node3", 0}} {
		if got := ServersOnHost(servers, c.host); got != c.want {
			t.Errorf("ServersOnHost(%s) = %d, want %d", c.host, got, c.want)
		}
	}
}

func TestStateRefusal(t *testing.T) {
	if err := StateRefusal("node2", nil); err != nil {
		t.Errorf("StateRefusal(node2, none) = %v, want nil", err)
	}
	err := StateRefusal("node1", []string{"mariadb", "ovn"})
	if err == nil || rest.StatusFor(err) != 409 || !strings.Contains(err.Error(), "node1 holds the data of mariadb, ovn") {
		t.Errorf("StateRefusal(node1, mariadb ovn) = %v, want 409 naming both", err)
	}
}
