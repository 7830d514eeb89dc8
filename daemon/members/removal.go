package members

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/osdcloud/osd/daemon/deploy"
	"github.com/osdcloud/osd/daemon/node"
	"github.com/osdcloud/osd/daemon/openstack"
	"github.com/osdcloud/osd/daemon/rest"
)

// LeavingTaint (effect NoExecute) is put on a node being removed: every pod leaves it,
// the DaemonSets' too (nova-compute, ovn-controller, the metadata agent), so that none of
// them registers the node again once the cloud has forgotten it.
const LeavingTaint = "osd.cloud/leaving"

// leaveTimeout bounds the wait for the pods of a node being removed to stop.
var leaveTimeout = 2 * time.Minute

// RemoveNode takes member name's node out of Kubernetes and the cloud. It refuses while
// the node holds the data of stateful services (even forced: that data would be lost)
// and while VMs run there unless force. Then it disables the node's nova-compute (no new
// server lands there), cordons and drains the node, makes every pod leave it, deletes the
// node's nova-compute service, its resource provider and its OVN chassis, and deletes the
// Node and the node password k3s keeps for it (so the name can join again).
func (s *Service) RemoveNode(ctx context.Context, name string, force bool) error {
	cs, err := s.adminClient()
	if err != nil {
		return err
	}
	if _, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		slog.Info("member has no Kubernetes node; removing its record", "member", name)
		if err := s.forgetCloudHost(ctx, cs, name, force); err != nil {
			return err
		}
		return s.forgetNode(ctx, cs, name)
	} else if err != nil {
		return fmt.Errorf("read node %s: %w", name, err)
	}
	if err := s.refuseStateHolder(ctx, name); err != nil {
		return err
	}
	vms, err := s.vmCounter(cs)(ctx, name)
	if err != nil {
		return err
	}
	if vms > 0 && !force {
		return rest.Errorf(rest.ErrConflict, "%d VMs run on %s: migrate or delete them first, or remove it anyway with --force (their VMs are lost)", vms, name)
	}
	if vms > 0 {
		slog.Warn("removing a node with VMs (forced)", "node", name, "vms", vms)
	}
	// Nova first: no new server lands on a compute host that is leaving.
	if err := s.disableCompute(ctx, name, removeReason, force); err != nil {
		return err
	}
	patch := []byte(`{"spec":{"unschedulable":true}}`)
	if _, err := cs.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("cordon %s: %w", name, err)
	}
	if err := drain(ctx, cs, name, drainTimeout); err != nil {
		return err
	}
	if err := evictAll(ctx, cs, name, leaveTimeout); err != nil {
		return err
	}
	if err := s.forgetCloudHost(ctx, cs, name, force); err != nil {
		return err
	}
	if err := s.forgetNode(ctx, cs, name); err != nil {
		return err
	}
	slog.Info("removed node from Kubernetes and the cloud", "node", name, "vms", vms, "force", force)
	return nil
}

// refuseStateHolder refuses (409) the removal of a node that holds the data of stateful
// services, naming them.
func (s *Service) refuseStateHolder(ctx context.Context, name string) error {
	held, err := s.cloud.StateHeld(ctx)
	if err != nil {
		return err
	}
	return StateRefusal(name, held[name])
}

// StateRefusal is the refusal (409) to remove node name while it holds the data of the
// stateful releases held, naming them; nil when it holds none (pure).
func StateRefusal(name string, held []string) error {
	if len(held) == 0 {
		return nil
	}
	return rest.Errorf(rest.ErrConflict, "%s holds the data of %s (their pods run only there, on its disk): removing it would lose that data, so osd refuses",
		name, strings.Join(held, ", "))
}

// removeReason is the disabled reason Nova shows for a node being removed.
const removeReason = "osd cluster remove"

// disableCompute disables name's nova-compute with reason when the cloud runs; with force,
// a cloud that cannot be reached is only logged.
func (s *Service) disableCompute(ctx context.Context, name, reason string, force bool) error {
	if s.st.KubernetesOnly(ctx) {
		return nil
	}
	c, err := s.cloud.CloudClient(ctx)
	if err == nil {
		var changed bool
		if changed, err = c.DisableComputeService(ctx, name, reason); err == nil && changed {
			slog.Info("disabled nova-compute", "node", name, "reason", reason)
		}
	}
	if errors.Is(err, openstack.ErrHostNotMapped) {
		if reason == removeReason {
			// Not mapped yet: the scheduler cannot place a server there either, and
			// forgetting the host deletes its service all the same.
			slog.Info("nova-compute not mapped to a cell yet: nothing to disable", "node", name)
			return nil
		}
		return fmt.Errorf("disable nova-compute on %s: Nova has not mapped the host to its cell yet (it does within 10 s of the node's nova-compute registering): try again in a few seconds", name)
	}
	if err != nil && !force {
		return fmt.Errorf("disable nova-compute on %s: %w (--force goes on without)", name, err)
	}
	if err != nil {
		slog.Warn("cannot disable the node's nova-compute (forced)", "node", name, "err", err)
	}
	return nil
}

// evictAll puts LeavingTaint on node and waits, at most timeout, until no pod of the cloud
// runs there any more (an unreachable node's pods never confirm: it goes on after timeout).
func evictAll(ctx context.Context, cs kubernetes.Interface, name string, timeout time.Duration) error {
	if _, err := node.EnsureTaint(ctx, cs, name, corev1.Taint{Key: LeavingTaint, Value: "true", Effect: corev1.TaintEffectNoExecute}, true); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		pods, err := cs.CoreV1().Pods(deploy.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
		if err != nil {
			return fmt.Errorf("list pods on %s: %w", name, err)
		}
		if len(pods.Items) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			slog.Warn("pods still on the leaving node; going on", "node", name, "pods", len(pods.Items))
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// forgetCloudHost deletes what the cloud keeps of compute host name once nothing runs
// there: its nova-compute service (and with it its hypervisor and resource provider), any
// resource provider left of that name, and its OVN chassis. Without a deployed cloud it
// does nothing; with force, a cloud that cannot be reached is only logged.
func (s *Service) forgetCloudHost(ctx context.Context, cs kubernetes.Interface, name string, force bool) error {
	if s.st.KubernetesOnly(ctx) {
		return nil
	}
	fail := func(err error) error {
		if force {
			slog.Warn("cannot forget the node in the cloud (forced)", "node", name, "err", err)
			return nil
		}
		return fmt.Errorf("forget %s in the cloud: %w (--force goes on without)", name, err)
	}
	c, err := s.cloud.CloudClient(ctx)
	if err != nil {
		return fail(err)
	}
	done, err := c.ForgetComputeHost(ctx, name)
	if err != nil {
		return fail(err)
	}
	chassis, err := deleteChassis(ctx, cs, name)
	if err != nil {
		return fail(err)
	}
	slog.Info("forgot the node in the cloud", "node", name, "removed", done.String(), "chassis", chassis)
	return nil
}
