package charts

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/osdcloud/osd/daemon/deploy"
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
			if got != node || pod.NodeSelector[controlPlaneLabel] != "enabled" || (node == "" && len(pod.NodeSelector) != 1) {
				t.Errorf("%s with node %q: nodeSelector %v, want kubernetes.io/hostname=%q and %s=enabled", c.workload, node, pod.NodeSelector, node, controlPlaneLabel)
			}
		}
	}
}

// controlPlaneLabel is the label of nodes with the control role (cluster.RoleLabels).
const controlPlaneLabel = "node-restriction.kubernetes.io/openstack-control-plane"

// TestControlPlaneOnControlNodes: every control-plane Deployment and StatefulSet runs
// only on nodes with the control role (issue 35, item 4), so that the node authorizer
// never hands a compute-only node their Secrets; the DaemonSets of the compute role
// (nova-compute, ovn-controller, the metadata agent) keep their own selectors.
func TestControlPlaneOnControlNodes(t *testing.T) {
	for _, release := range []string{"mariadb", "rabbitmq", "memcached", "keystone", "glance", "placement", "nova", "neutron", "ovn", "horizon", "heat", "cinder"} {
		spec := deploy.DeploymentSpec{Images: testImages}
		if release == "cinder" {
			spec = cinderSpec("ceph", nil)
		}
		_, typed := renderService(t, release, spec)
		n := 0
		for name, o := range typed {
			var pod corev1.PodSpec
			switch w := o.(type) {
			case *appsv1.StatefulSet:
				pod = w.Spec.Template.Spec
			case *appsv1.Deployment:
				pod = w.Spec.Template.Spec
			case *appsv1.DaemonSet:
				if w.Spec.Template.Spec.NodeSelector[controlPlaneLabel] != "" {
					t.Errorf("%s: DaemonSet %s selects %s, want its role's nodes", release, name, controlPlaneLabel)
				}
				continue
			default:
				continue
			}
			n++
			if pod.NodeSelector[controlPlaneLabel] != "enabled" {
				t.Errorf("%s: %s nodeSelector = %v, want %s=enabled", release, name, pod.NodeSelector, controlPlaneLabel)
			}
		}
		if n == 0 {
			t.Errorf("%s renders no Deployment or StatefulSet", release)
		}
	}
}

// podSecrets are the Secrets pod references (volumes, env, envFrom): what the node
// authorizer lets the kubelet of its node read.
func podSecrets(pod corev1.PodSpec) map[string]bool {
	set := map[string]bool{}
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			set[v.Secret.SecretName] = true
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.Secret != nil {
					set[s.Secret.Name] = true
				}
			}
		}
	}
	for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				set[e.ValueFrom.SecretKeyRef.Name] = true
			}
		}
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil {
				set[e.SecretRef.Name] = true
			}
		}
	}
	return set
}

// TestComputeNodeSecrets: the pods of a compute-only node (nova-compute, ovn-controller,
// the metadata agent) reference only the Secrets they use (issue 35, item 4): no database
// password, and no Keystone password but nova-compute's own.
func TestComputeNodeSecrets(t *testing.T) {
	want := map[string][]string{
		"DaemonSet/nova-compute":               {"nova-compute-config", "nova-keystone", "nova-rabbitmq"},
		"DaemonSet/ovn-controller":             nil,
		"DaemonSet/ovn-controller-gateway":     nil,
		"DaemonSet/neutron-ovn-metadata-agent": {"metadata-proxy", "neutron-config"},
	}
	seen := 0
	for _, release := range []string{"nova", "ovn", "neutron"} {
		_, typed := renderService(t, release, deploy.DeploymentSpec{Images: testImages})
		for name, o := range typed {
			ds, ok := o.(*appsv1.DaemonSet)
			if !ok {
				continue
			}
			w, known := want[name]
			if !known {
				t.Errorf("%s renders %s, which this test does not know: add what it may read", release, name)
				continue
			}
			seen++
			got := podSecrets(ds.Spec.Template.Spec)
			allowed := map[string]bool{}
			for _, s := range w {
				allowed[s] = true
			}
			for s := range got {
				if !allowed[s] {
					t.Errorf("%s references Secret %s, want only %v", name, s, w)
				}
			}
			for s := range allowed {
				if !got[s] {
					t.Errorf("%s does not reference Secret %s, which it needs (want %v)", name, s, w)
				}
			}
		}
	}
	if seen != len(want) {
		t.Errorf("rendered %d of the compute DaemonSets %v", seen, want)
	}
}
