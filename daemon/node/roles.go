package node

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

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
