package node

import (
	"fmt"
	"log/slog"
	"time"

	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/osdcloud/osd/daemon/deploy"
	"github.com/osdcloud/osd/daemon/deploy/helmclient"
	"github.com/osdcloud/osd/daemon/k3s"
	"github.com/osdcloud/osd/daemon/rest"
)

// Clients are the cluster's Kubernetes clients with the admin credentials k3s wrote
// (only on the node that runs the server), built once.
type Clients struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	APIExt  apiextensions.Interface
	Helm    *helmclient.Client
}

// Clients returns the admin clients, building them the first time the admin kubeconfig
// exists (ErrNotReady before: this node runs no Kubernetes server, or not yet).
func (n *Node) Clients() (*Clients, error) {
	n.clientsMu.Lock()
	defer n.clientsMu.Unlock()
	if n.clients != nil {
		return n.clients, nil
	}
	rc, err := k3s.RESTConfig(n.cfg.Paths)
	if err != nil {
		return nil, rest.Errorf(rest.ErrNotReady, "this node runs no Kubernetes server (or not yet): %v", err)
	}
	rc.Timeout = 30 * time.Second
	c := &Clients{}
	if c.Kube, err = kubernetes.NewForConfig(rc); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if c.Dynamic, err = dynamic.NewForConfig(rc); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if c.APIExt, err = apiextensions.NewForConfig(rc); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	// Helm waits on its own deadlines: no client-wide timeout for it.
	hrc := *rc
	hrc.Timeout = 0
	c.Helm = helmclient.New(&hrc, deploy.ValuesHash, slog.Default().With("component", "helm"))
	n.clients = c
	return c, nil
}

// Admin is the admin Kubernetes client (Clients().Kube).
func (n *Node) Admin() (kubernetes.Interface, error) {
	c, err := n.Clients()
	if err != nil {
		return nil, err
	}
	return c.Kube, nil
}
