package k3s

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/k3s-io/k3s/pkg/clientaccess"
	"github.com/k3s-io/k3s/pkg/kubeadm"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
)

// agentTokenLabel marks the bootstrap tokens osd issued, with the node each is for.
const agentTokenLabel = "osd.cloud/agent-token-for"

// ServerCA is the server's CA bundle, which agents check the supervisor against.
func (p Paths) ServerCA() string { return filepath.Join(p.DataDir(), "server", "tls", "server-ca.crt") }

// CreateAgentToken issues a k3s bootstrap token with which the agent of node registers,
// valid for ttl from now, replacing any osd issued for node before. It grants only
// authentication as a bootstrapping node (k3s's node-token group: the supervisor's agent
// routes, nothing in the Kubernetes API beyond discovery) and lets nobody act as a server;
// the node itself keeps its kubelet certificate afterwards, so the token is dropped once
// the node has joined (DeleteAgentTokens). The token is returned in k3s's K10 form,
// which carries the server CA's hash for the agent to check.
func CreateAgentToken(ctx context.Context, cs kubernetes.Interface, p Paths, node string, ttl time.Duration) (string, time.Time, error) {
	ca, err := os.ReadFile(p.ServerCA())
	if err != nil {
		return "", time.Time{}, fmt.Errorf("read the server CA: %w", err)
	}
	if err := DeleteAgentTokens(ctx, cs, node); err != nil {
		return "", time.Time{}, err
	}
	raw, err := bootstraputil.GenerateBootstrapToken()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("generate an agent token: %w", err)
	}
	bts, err := kubeadm.NewBootstrapTokenString(raw)
	if err != nil {
		return "", time.Time{}, err
	}
	expires := time.Now().Add(ttl).UTC().Truncate(time.Second)
	secret := kubeadm.BootstrapTokenToSecret(&kubeadm.BootstrapToken{
		Token:       bts,
		Description: "osd: registers the k3s agent of " + node,
		Expires:     &metav1.Time{Time: expires},
		Usages:      []string{"authentication"},
		Groups:      []string{kubeadm.NodeBootstrapTokenAuthGroup},
	})
	secret.Labels = map[string]string{agentTokenLabel: node, "app.kubernetes.io/managed-by": "osd"}
	if _, err := cs.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return "", time.Time{}, fmt.Errorf("store the agent token of %s: %w", node, err)
	}
	tok, err := clientaccess.FormatTokenBytes(bts.String(), ca)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("format the agent token of %s: %w", node, err)
	}
	return tok, expires, nil
}

// DeleteAgentTokens deletes every bootstrap token osd issued for node.
func DeleteAgentTokens(ctx context.Context, cs kubernetes.Interface, node string) error {
	list, err := cs.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: agentTokenLabel + "=" + node})
	if err != nil {
		return fmt.Errorf("list the agent tokens of %s: %w", node, err)
	}
	for _, s := range list.Items {
		if s.Type != corev1.SecretType(bootstrapapi.SecretTypeBootstrapToken) {
			continue
		}
		err := cs.CoreV1().Secrets(metav1.NamespaceSystem).Delete(ctx, s.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete the agent token of %s: %w", node, err)
		}
	}
	return nil
}

// BarNode records node as removed (RemovedNodesConfigMap), so that nothing can create a
// Node of that name until UnbarNode.
func BarNode(ctx context.Context, cs kubernetes.Interface, node string) error {
	return editRemovedNodes(ctx, cs, func(data map[string]string) bool {
		if _, ok := data[node]; ok {
			return false
		}
		data[node] = time.Now().UTC().Format(time.RFC3339)
		return true
	})
}

// UnbarNode lets a node called node register again.
func UnbarNode(ctx context.Context, cs kubernetes.Interface, node string) error {
	return editRemovedNodes(ctx, cs, func(data map[string]string) bool {
		if _, ok := data[node]; !ok {
			return false
		}
		delete(data, node)
		return true
	})
}

// editRemovedNodes applies edit to the removed-nodes list (creating it), retrying on
// conflicts; edit reports whether it changed anything.
func editRemovedNodes(ctx context.Context, cs kubernetes.Interface, edit func(map[string]string) bool) error {
	cms := cs.CoreV1().ConfigMaps(metav1.NamespaceSystem)
	for attempt := 0; ; attempt++ {
		cm, err := cms.Get(ctx, RemovedNodesConfigMap, metav1.GetOptions{})
		create := apierrors.IsNotFound(err)
		if err != nil && !create {
			return fmt.Errorf("read the removed nodes: %w", err)
		}
		if create {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: RemovedNodesConfigMap, Namespace: metav1.NamespaceSystem,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "osd"}}}
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		if !edit(cm.Data) {
			return nil
		}
		if create {
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
		} else {
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		}
		if err == nil {
			return nil
		}
		if (!apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err)) || attempt >= 5 {
			return fmt.Errorf("update the removed nodes: %w", err)
		}
	}
}
