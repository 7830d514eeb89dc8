package k3s

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/osdcloud/osd/bootstrap/fsutil"
)

// NodeState is what the daemon reports about its Kubernetes node.
type NodeState struct {
	APIReady  bool
	NodeReady bool
	PodCIDR   string
	Reason    string // why the node is not ready, for people
}

// RESTConfig loads the admin kubeconfig k3s wrote.
func RESTConfig(p Paths) (*rest.Config, error) { return restConfig(p.Kubeconfig()) }

// AgentRESTConfig loads the kubelet's kubeconfig of an agent node (AgentKubeconfig).
func AgentRESTConfig(p Paths) (*rest.Config, error) { return restConfig(p.AgentKubeconfig()) }

func restConfig(path string) (*rest.Config, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("kubeconfig %s not written yet", path)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// Probe asks the API server about readiness and the node's state; the node counts as
// Ready only if its kubelet reported so at or after since (see NodeReadiness).
func Probe(ctx context.Context, cs kubernetes.Interface, node string, since time.Time) NodeState {
	var st NodeState
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").Param("verbose", "true").DoRaw(ctx)
	if err != nil || !strings.Contains(string(body), "readyz check passed") {
		st.Reason = ReadyzReason(string(body), err)
		return st
	}
	st.APIReady = true
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		st.Reason = fmt.Sprintf("node %s has not registered yet (kubelet starting)", node)
		return st
	}
	if err != nil {
		st.Reason = "read node: " + firstLine(err.Error())
		return st
	}
	st.PodCIDR = n.Spec.PodCIDR
	st.NodeReady, st.Reason = NodeReadiness(n, since)
	return st
}

// ReadyzReason turns the API server's verbose /readyz answer (or the error of asking)
// into one line naming the checks that do not pass yet.
func ReadyzReason(body string, err error) string {
	var failing []string
	for _, l := range strings.Split(body, "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(l), "[-]"); ok {
			name, _, _ = strings.Cut(name, " ")
			failing = append(failing, strings.TrimPrefix(name, "poststarthook/"))
		}
	}
	if len(failing) > 0 {
		if len(failing) > 4 {
			failing = append(failing[:4], fmt.Sprintf("and %d more", len(failing)-4))
		}
		return "API server starting: waiting for " + strings.Join(failing, ", ")
	}
	if err != nil {
		return "API server not answering: " + firstLine(err.Error())
	}
	return "API server not ready: " + firstLine(body)
}

// NodeReadiness says whether n is Ready and, when not, why (pure). A Ready condition
// whose last heartbeat is older than since (after a restart or a power cut: what the
// cluster recorded before it) does not count: only a report of now does.
func NodeReadiness(n *corev1.Node, since time.Time) (bool, string) {
	for _, t := range n.Spec.Taints {
		if t.Key == "node.cloudprovider.kubernetes.io/uninitialized" {
			return false, "node is waiting for the cloud controller to initialize it (taint " + t.Key + ")"
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			if c.LastHeartbeatTime.Time.Before(since.Truncate(time.Second)) {
				return false, fmt.Sprintf("node %s has not reported since %s (its last report, at %s, is from before)",
					n.Name, since.Format(time.RFC3339), c.LastHeartbeatTime.Format(time.RFC3339))
			}
			if n.Spec.Unschedulable {
				return true, "node is cordoned"
			}
			return true, ""
		}
		msg := c.Reason
		if c.Message != "" {
			msg += ": " + c.Message
		}
		if n.Spec.PodCIDR == "" {
			msg += " (no pod CIDR assigned yet)"
		}
		return false, "node not ready: " + firstLine(msg)
	}
	return false, "node has no Ready condition yet"
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// EnsureCNIConfig writes the pod network configuration for podCIDR if it differs from what
// is on disk, and reports whether it wrote.
func EnsureCNIConfig(p Paths, podCIDR string) (bool, error) {
	want, err := CNIConfig(podCIDR)
	if err != nil {
		return false, err
	}
	if cur, err := os.ReadFile(p.CNIConfFile()); err == nil && string(cur) == string(want) {
		return false, nil
	}
	if err := fsutil.WriteFileAtomic(p.CNIConfFile(), want, 0o644); err != nil {
		return false, fmt.Errorf("write cni config: %w", err)
	}
	return true, nil
}
