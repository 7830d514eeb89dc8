package charts

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/osdcloud/osd/daemon/deploy"
)

// TestPortNamesValid: every container port and Service port name of every chart is one the
// API server takes (an IANA service name: at most 15 characters; a longer one made the
// whole ovn release fail to install).
func TestPortNamesValid(t *testing.T) {
	for _, svc := range deploy.DefaultCatalog().Services {
		t.Run(svc.Name, func(t *testing.T) {
			_, typed := renderService(t, svc.Name, hardeningSpec(deploy.StorageCeph))
			for name, o := range typed {
				var pod *corev1.PodSpec
				switch v := o.(type) {
				case *appsv1.Deployment:
					pod = &v.Spec.Template.Spec
				case *appsv1.StatefulSet:
					pod = &v.Spec.Template.Spec
				case *appsv1.DaemonSet:
					pod = &v.Spec.Template.Spec
				case *batchv1.Job:
					pod = &v.Spec.Template.Spec
				case *corev1.Service:
					for _, p := range v.Spec.Ports {
						if p.Name != "" {
							if errs := validation.IsDNS1123Label(p.Name); len(errs) > 0 {
								t.Errorf("%s port name %q: %v", name, p.Name, errs)
							}
						}
						if s := p.TargetPort.StrVal; s != "" {
							if errs := validation.IsValidPortName(s); len(errs) > 0 {
								t.Errorf("%s target port %q: %v", name, s, errs)
							}
						}
					}
				}
				if pod == nil {
					continue
				}
				for _, c := range append(append([]corev1.Container(nil), pod.InitContainers...), pod.Containers...) {
					for _, p := range c.Ports {
						if p.Name == "" {
							continue
						}
						if errs := validation.IsValidPortName(p.Name); len(errs) > 0 {
							t.Errorf("%s container %s port name %q: %v", name, c.Name, p.Name, errs)
						}
					}
				}
			}
		})
	}
}
