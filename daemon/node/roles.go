package node

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/osdcloud/osd/daemon/cluster"
)

// LabelRoles gives node the labels of roles (cluster.RoleLabels; a merge patch: other
// labels are kept) and reports whether it changed anything.
func LabelRoles(ctx context.Context, cs kubernetes.Interface, node string, roles []string) (bool, string, error) {
	want, err := cluster.RoleLabels(roles)
	if err != nil {
		return false, "", err
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return false, "", fmt.Errorf("read node %s: %w", node, err)
	}
	missing := map[string]string{}
	for k, v := range want {
		if n.Labels[k] != v {
			missing[k] = v
		}
	}
	names := make([]string, 0, len(want))
	for k := range want {
		names = append(names, strings.TrimPrefix(k, cluster.RoleLabelPrefix))
	}
	sort.Strings(names)
	detail := "node " + node + ": " + strings.Join(names, ", ")
	if len(missing) == 0 {
		return false, detail, nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": missing}})
	if err != nil {
		return false, "", err
	}
	if _, err := cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return false, "", fmt.Errorf("label node %s: %w", node, err)
	}
	return true, detail, nil
}

// TaintRoles gives node cluster.NoControlPlaneTaint when its roles lack the control role
// and takes it away otherwise; it reports whether it changed anything.
func TaintRoles(ctx context.Context, cs kubernetes.Interface, name string, roles []string) (bool, error) {
	t := corev1.Taint{Key: cluster.NoControlPlaneTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	return EnsureTaint(ctx, cs, name, t, cluster.WantsNoControlPlaneTaint(roles))
}

// EnsureTaint gives node name taint t (on) or takes it away (off), retrying on a conflict
// with another writer of the Node; it reports whether it changed anything.
func EnsureTaint(ctx context.Context, cs kubernetes.Interface, name string, t corev1.Taint, on bool) (bool, error) {
	changed := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var taints []corev1.Taint
		if taints, changed = SetTaint(n.Spec.Taints, t, on); !changed {
			return nil
		}
		n.Spec.Taints = taints
		_, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("taint node %s with %s: %w", name, t.Key, err)
	}
	return changed, nil
}

// SetTaint returns taints with t present (on) or absent (off), matched by key and effect,
// and whether that changed them (pure).
func SetTaint(taints []corev1.Taint, t corev1.Taint, on bool) ([]corev1.Taint, bool) {
	var out []corev1.Taint
	found := false
	for _, x := range taints {
		if x.Key == t.Key && x.Effect == t.Effect {
			found = true
			if on {
				out = append(out, t)
			}
			continue
		}
		out = append(out, x)
	}
	if on && !found {
		out = append(out, t)
	}
	return out, found != on || (on && found && !sameTaint(taints, t))
}

func sameTaint(taints []corev1.Taint, t corev1.Taint) bool {
	for _, x := range taints {
		if x.Key == t.Key && x.Effect == t.Effect {
			return x.Value == t.Value
		}
	}
	return false
}
