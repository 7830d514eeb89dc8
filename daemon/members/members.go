// Package members is the daemon's side of cluster membership that touches Kubernetes, the
// cloud and the host: it is what cluster.Service asks (cluster.Hooks: this node in
// listings, every node's state, the agent credential a joining node gets, admission with
// its role labels, the host firewall's peers, and removal: VMs counted, Nova's compute
// disabled, the node drained, deleted and barred), and it keeps the names of the nodes
// admitted to Kubernetes (KeepAdmission) for the daemon's life.
package members

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/cluster"
	"github.com/osdcloud/osd/daemon/hostplan"
	"github.com/osdcloud/osd/daemon/k3s"
	"github.com/osdcloud/osd/daemon/node"
	"github.com/osdcloud/osd/daemon/openstack"
	"github.com/osdcloud/osd/daemon/rest"
	"github.com/osdcloud/osd/daemon/state"
	"github.com/osdcloud/osd/daemon/store"
)

// InstanceLabel marks pods that are VMs, counted on a Kubernetes-only cluster (no pod
// carries it today: such a cluster runs no VMs).
const InstanceLabel = "osd.cloud/instance"

// VMCounter says how many VMs run on a Kubernetes node; osd cluster remove refuses a node
// with VMs unless forced.
type VMCounter func(ctx context.Context, node string) (int, error)

// Deps are what the membership side is given when it is made.
type Deps struct {
	// Cloud is the deployment resource: the admin's cloud and where stateful services keep
	// their data.
	Cloud Cloud
	// Images completes listings with the images each member holds.
	Images Images
	// Address is this daemon's HTTPS API address ("" when it does not listen).
	Address func() string
}

// Cloud is what membership needs of the deployment resource (deployment.Service).
type Cloud interface {
	// CloudClient logs in to the cloud as admin.
	CloudClient(ctx context.Context) (*openstack.Client, error)
	// StateHeld lists by node the stateful releases whose data it holds.
	StateHeld(ctx context.Context) (map[string][]string, error)
}

// Images is what listings need of the image resource (images.Service): whether each
// member holds the images of its roles.
type Images interface {
	DescribeMembers(ctx context.Context, ms []api.Member)
}

// Service is the membership side of one daemon.
type Service struct {
	st      *state.State
	cloud   Cloud
	images  Images
	address func() string

	admissionMu sync.Mutex // serializes syncAdmission
}

// New returns the membership side of st.
func New(st *state.State, deps Deps) *Service {
	return &Service{st: st, cloud: deps.Cloud, images: deps.Images, address: deps.Address}
}

// The membership side is what the cluster's server side asks of Kubernetes, the cloud
// and this host (cluster.Hooks): the daemon gives it to cluster.New.
var _ cluster.Hooks = (*Service)(nil)

// TokenIssued implements cluster.Hooks: issuing a join token lets no node in (nor
// un-bars a removed one): the join request it proves does, and only for the kubelet of
// that join (AgentCredential).
func (s *Service) TokenIssued(context.Context, string) error { return nil }

// Hostname implements cluster.Hooks: this host's OS hostname ("" when it cannot be read).
func (s *Service) Hostname() string {
	h, _ := os.Hostname()
	return h
}

// Peers implements cluster.Hooks: this host's firewall trusts add and no longer trusts
// remove (hostplan.UpdateFirewallPeers).
func (s *Service) Peers(ctx context.Context, add, remove []string) error {
	return hostplan.UpdateFirewallPeers(ctx, s.st, nil, add, remove)
}

func (s *Service) adminClient() (kubernetes.Interface, error) { return s.st.Node.Admin() }

// NodeStates reports every Kubernetes node's readiness by name.
func (s *Service) NodeStates(ctx context.Context) (map[string]string, error) {
	cs, err := s.adminClient()
	if err != nil {
		return nil, err
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(nodes.Items))
	for i := range nodes.Items {
		ready, _ := k3s.NodeReadiness(&nodes.Items[i], time.Time{}) // other nodes: the cluster's view
		out[nodes.Items[i].Name] = api.NodeNotReady
		if ready {
			out[nodes.Items[i].Name] = api.NodeReady
		}
	}
	return out, nil
}

// Local describes this daemon in member listings: the node that ran osd init (all
// roles), or a joined member (its roles). nil when it is neither.
func (s *Service) Local() *api.Member {
	ctx, cancel := context.WithTimeout(s.st.Ctx, 5*time.Second)
	defer cancel()
	now := time.Now()
	host, _ := os.Hostname()
	m := &api.Member{Name: s.st.Cfg.NodeName, Hostname: host, Version: api.Version, Local: true, LastHeartbeat: &now, JoinedAt: s.st.Started}
	m.Address = s.address()
	if s.st.Initialized(ctx) {
		m.Roles = append([]string(nil), cluster.ValidRoles...)
		return m
	}
	if h, err := s.st.Host(ctx); err == nil && h.Join != nil && h.Join.State == state.JoinMember {
		m.Roles = append([]string(nil), h.Join.Roles...)
		return m
	}
	return nil
}

// vmCounter asks Nova for the servers on the node when OpenStack runs here (a
// Kubernetes-only cluster has no VMs but pods labelled InstanceLabel).
func (s *Service) vmCounter(cs kubernetes.Interface) VMCounter {
	return func(ctx context.Context, node string) (int, error) {
		if s.st.KubernetesOnly(ctx) {
			return countInstancePods(cs)(ctx, node)
		}
		c, err := s.cloud.CloudClient(ctx)
		if err != nil {
			return 0, fmt.Errorf("count the VMs on %s: %w (osd cluster remove --force skips the check)", node, err)
		}
		servers, err := c.ListServers(ctx, true)
		if err != nil {
			return 0, fmt.Errorf("count the VMs on %s: %w (osd cluster remove --force skips the check)", node, err)
		}
		return ServersOnHost(servers, node), nil
	}
}

// ServersOnHost counts the servers Nova placed on compute host (pure): every server whose
// host is that node, whatever its state but deleted (the node's k3s node name is the
// nova-compute host name).
func ServersOnHost(servers []openstack.Server, host string) int {
	n := 0
	for _, s := range servers {
		if s.Host == host && s.Status != "DELETED" && s.Status != "SOFT_DELETED" {
			n++
		}
	}
	return n
}

// countInstancePods is the VMCounter of a Kubernetes-only cluster: pods on node labelled InstanceLabel.
func countInstancePods(cs kubernetes.Interface) VMCounter {
	return func(ctx context.Context, node string) (int, error) {
		pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: InstanceLabel, FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return 0, fmt.Errorf("count VMs on %s: %w", node, err)
		}
		n := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodPending {
				n++
			}
		}
		return n, nil
	}
}

// forgetNode makes sure node cannot come back with what it kept: its name is barred and
// no longer admitted first (the kubelet certificate it keeps could otherwise create its
// Node again), then its Node, its agent credentials and the node password k3s keeps for
// it go (so that a node of that name can join afresh once a new join of it completes).
func (s *Service) forgetNode(ctx context.Context, cs kubernetes.Interface, name string) error {
	if err := k3s.BarNode(ctx, cs, name); err != nil {
		return err
	}
	if err := s.syncAdmission(ctx, cs, ""); err != nil { // barred: no longer admitted
		return err
	}
	if err := cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete node %s: %w", name, err)
	}
	if err := k3s.DeleteAgentTokens(ctx, cs, name); err != nil {
		return err
	}
	err := cs.CoreV1().Secrets("kube-system").Delete(ctx, name+".node-password.k3s", metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete node password of %s: %w", name, err)
	}
	return nil
}

// drainTimeout bounds how long removal waits for evicted pods.
var drainTimeout = 2 * time.Minute

// drain evicts the pods on node that would not go with it and waits for them to end.
func drain(ctx context.Context, cs kubernetes.Interface, node string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return fmt.Errorf("list pods on %s: %w", node, err)
		}
		left := DrainTargets(pods.Items)
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			// The node is about to be deleted: its pods are garbage collected with it.
			slog.Warn("pods still on the node after draining; deleting it anyway", "node", node, "pods", len(left))
			return nil
		}
		for _, p := range left {
			ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
			err := cs.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev)
			if apierrors.IsTooManyRequests(err) {
				continue // a disruption budget: retry
			}
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("evict %s/%s: %w", p.Namespace, p.Name, err)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// DrainTargets are the pods a drain evicts (pure): not finished, not DaemonSet pods and
// not mirror pods.
func DrainTargets(pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
			continue
		}
		ds := false
		for _, o := range p.OwnerReferences {
			if o.Kind == "DaemonSet" {
				ds = true
			}
		}
		if !ds {
			out = append(out, p)
		}
	}
	return out
}

// AgentCredential issues node name's k3s agent credential: a bootstrap token for this
// join only, with this server's supervisor URL (the cluster's server token never leaves
// this host).
func (s *Service) AgentCredential(ctx context.Context, name string) (cluster.AgentCredential, error) {
	if !s.st.Node.Running() {
		return cluster.AgentCredential{}, rest.Errorf(rest.ErrNotReady, "the embedded Kubernetes is not running here yet: run osd init first")
	}
	cs, err := s.adminClient()
	if err != nil {
		return cluster.AgentCredential{}, err
	}
	ttl := s.st.Cfg.AgentTokenTTL
	if ttl <= 0 {
		ttl = state.DefaultAgentTokenTTL
	}
	kc := s.st.Cfg.K3s()
	tok, expires, err := k3s.CreateAgentToken(ctx, cs, kc.Paths, name, ttl)
	if err != nil {
		return cluster.AgentCredential{}, err
	}
	// From now until the join completes, fails or is revoked, the kubelet holding this
	// token (and only it) may register a Node called name.
	if err := s.syncAdmission(ctx, cs, ""); err != nil {
		return cluster.AgentCredential{}, err
	}
	if err := k3s.DeleteStaleNode(ctx, cs, name); err != nil {
		return cluster.AgentCredential{}, err
	}
	return cluster.AgentCredential{ServerURL: fmt.Sprintf("https://%s", net.JoinHostPort(s.st.Cfg.PublicIP(), fmt.Sprint(kc.APIPort))),
		Token: tok, Expires: expires}, nil
}

// Admit gives a member that completed its join the labels of its roles (and, without
// the control role, the taint that keeps other workloads off it), admits its name for
// good (a removed node's name is un-barred only now), and drops the agent credential it
// joined with (its kubelet certificate is what it uses now).
func (s *Service) Admit(ctx context.Context, name string, roles []string) error {
	cs, err := s.adminClient()
	if err != nil {
		return err
	}
	if err := k3s.UnbarNode(ctx, cs, name); err != nil {
		return err
	}
	if err := s.syncAdmission(ctx, cs, ""); err != nil {
		return err
	}
	if _, _, err := node.LabelRoles(ctx, cs, name, roles); err != nil {
		return err
	}
	if _, err := node.TaintRoles(ctx, cs, name, roles); err != nil {
		return err
	}
	return k3s.DeleteAgentTokens(ctx, cs, name)
}

// TokenDropped deletes the agent credentials issued for name and takes it off the
// names being admitted (its join token is being revoked: whatever the join's agent got
// registers no Node), then deletes the Node the join may have registered meanwhile,
// unless name is a member.
func (s *Service) TokenDropped(ctx context.Context, name string) error {
	cs, err := s.adminClient()
	if err != nil {
		return nil // no Kubernetes here: no credential was issued
	}
	if err := k3s.DeleteAgentTokens(ctx, cs, name); err != nil {
		return err
	}
	if err := s.syncAdmission(ctx, cs, name); err != nil {
		return err
	}
	if _, err := s.st.DB.GetMember(ctx, name); err == nil || !errors.Is(err, store.ErrNotFound) {
		return err // a member (whose token is long used) keeps its Node
	}
	if name == s.st.Cfg.NodeName {
		return nil
	}
	err = cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err == nil {
		slog.Info("deleted the Node a revoked join registered", "node", name)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the node of the revoked join of %s: %w", name, err)
	}
	return nil
}
