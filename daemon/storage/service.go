package storage

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/deploy"
	"github.com/osdcloud/osd/daemon/k3s"
	"github.com/osdcloud/osd/daemon/rest"
	"github.com/osdcloud/osd/daemon/state"
)

// monSelector finds the Ceph monitor's pod (charts/ceph).
const monSelector = "app.kubernetes.io/instance=ceph,app.kubernetes.io/component=mon"

// Service is the storage resource of one daemon.
type Service struct{ st *state.State }

// New returns the storage resource of st.
func New(st *state.State) *Service { return &Service{st: st} }

// Endpoints are the storage routes:
//
//	GET /1.0/storage  -> StorageStatus
func (s *Service) Endpoints() []rest.Endpoint {
	return []rest.Endpoint{{Path: "storage", Get: rest.Action{Handler: s.getStorage}}}
}

// getStorage answers GET /1.0/storage: the backend and why, and with Ceph its health,
// space and pools as the monitor reports them (Error says why they could not be read).
func (s *Service) getStorage(r *http.Request) rest.Response {
	c := s.Current(r.Context())
	st := api.StorageStatus{Backend: c.Backend, Reason: c.Reason, SizeBytes: c.Size}
	if c.Backend != api.StorageCeph {
		return rest.SyncResponse(st)
	}
	if !s.st.Node.Running() {
		st.Error = "the embedded Kubernetes is not running: run osd init"
		return rest.SyncResponse(st)
	}
	out, err := s.execInPod(r.Context(), deploy.Namespace, monSelector, "ceph-mon", Commands())
	if err == nil {
		err = ParseCeph(out, &st)
	}
	if err != nil {
		st.Error = err.Error()
	}
	return rest.SyncResponse(st)
}

// execInPod runs command in container of the first running pod matching selector in ns
// (as kubectl exec does) and returns its standard output; the error carries its standard
// error. It gives up after 30 s.
func (s *Service) execInPod(ctx context.Context, ns, selector, container string, command []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rc, err := k3s.RESTConfig(s.st.Cfg.Paths())
	if err != nil {
		return "", err
	}
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return "", err
	}
	pods, err := kc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return "", fmt.Errorf("list pods %s: %w", selector, err)
	}
	pod := ""
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			pod = p.Name
			break
		}
	}
	if pod == "" {
		return "", fmt.Errorf("no running pod %s in %s (%d found): osd status shows why", selector, ns, len(pods.Items))
	}
	req := kc.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: command, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(rc, "POST", req.URL())
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
		return stdout.String(), fmt.Errorf("%s in %s/%s: %w: %s", strings.Join(command, " "), ns, pod, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
