package charts

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/osdcloud/osd/bootstrap/deploy"
)

// TestStatefulPinnedToTheirNode: the workloads that keep their data in a hostPath run only
// on the node the daemon gives them (value node), and anywhere without one.
func TestStatefulPinnedToTheirNode(t *testing.T) {
	for _, c := range []struct{ release, workload string }{
		{"mariadb", "StatefulSet/mariadb"},
		{"rabbitmq", "StatefulSet/rabbitmq"},
		{"glance", "Deployment/glance-api"},
		{"ovn", "Deployment/ovn-central"},
	} {
		for _, node := range []string{"", "node1"} {
			spec := deploy.DeploymentSpec{Images: testImages}
			if node != "" {
				spec.Services = map[string]deploy.ServiceSpec{c.release: {Overrides: map[string]any{"node": node}}}
			}
			_, typed := renderService(t, c.release, spec)
			var pod corev1.PodSpec
			switch w := typed[c.workload].(type) {
			case *appsv1.StatefulSet:
				pod = w.Spec.Template.Spec
			case *appsv1.Deployment:
				pod = w.Spec.Template.Spec
			default:
				t.Fatalf("%s: no %s rendered", c.release, c.workload)
			}
			got := pod.NodeSelector["kubernetes.io/hostname"]
			if got != node || (node == "" && len(pod.NodeSelector) != 0) {
				t.Errorf("%s with node %q: nodeSelector %v, want kubernetes.io/hostname=%q", c.workload, node, pod.NodeSelector, node)
			}
		}
	}
}
