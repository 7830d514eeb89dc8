package k3s

import (
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// rule is one RBAC policy rule.
type rule struct {
	Groups    []string `json:"apiGroups"`
	Resources []string `json:"resources"`
	Verbs     []string `json:"verbs"`
}

func clusterRole(name string, rules ...rule) map[string]any {
	return map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
		"metadata": map[string]any{"name": name, "labels": map[string]string{"app.kubernetes.io/managed-by": "osd"}},
		"rules":    rules,
	}
}

func binding(kind, name, namespace, roleKind, role string, subject map[string]string) map[string]any {
	meta := map[string]any{"name": name, "labels": map[string]string{"app.kubernetes.io/managed-by": "osd"}}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	return map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta,
		"roleRef":  map[string]string{"apiGroup": "rbac.authorization.k8s.io", "kind": roleKind, "name": role},
		"subjects": []map[string]string{subject},
	}
}

func user(name string) map[string]string {
	return map[string]string{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name}
}

// rbacObjects are the permissions a library build of k3s does not create by itself: the
// embedded cloud controller (which clears the node's "uninitialized" taint and sets its
// addresses), the k3s supervisor's node controller, and the API server's access to the
// kubelet (needed by exec, logs and port-forward).
func rbacObjects() []map[string]any {
	const ccm = "k3s-cloud-controller-manager"
	core := []string{""}
	return []map[string]any{
		clusterRole(ccm,
			rule{[]string{"coordination.k8s.io"}, []string{"leases"}, []string{"get", "create", "update"}},
			rule{core, []string{"events"}, []string{"create", "patch", "update"}},
			rule{core, []string{"nodes"}, []string{"*"}},
			rule{core, []string{"nodes/status", "services/status"}, []string{"patch"}},
			rule{core, []string{"services", "pods"}, []string{"get", "list", "watch"}},
			rule{core, []string{"services"}, []string{"patch", "update"}},
			rule{core, []string{"serviceaccounts", "namespaces"}, []string{"create", "get"}},
			rule{[]string{"apps"}, []string{"daemonsets"}, []string{"*"}},
			rule{[]string{"discovery.k8s.io"}, []string{"endpointslices"}, []string{"get", "list", "watch"}},
		),
		binding("ClusterRoleBinding", ccm, "", "ClusterRole", ccm, user(ccm)),
		binding("ClusterRoleBinding", ccm+"-auth-delegator", "", "ClusterRole", "system:auth-delegator", user(ccm)),
		binding("RoleBinding", ccm+"-authentication-reader", "kube-system", "Role", "extension-apiserver-authentication-reader", user(ccm)),
		clusterRole("system:k3s-controller",
			rule{core, []string{"nodes"}, []string{"get", "list", "watch"}},
			rule{core, []string{"nodes/status"}, []string{"patch"}},
			rule{core, []string{"namespaces"}, []string{"list", "watch"}},
			rule{core, []string{"endpoints", "pods"}, []string{"get", "list", "watch"}},
			rule{[]string{"discovery.k8s.io"}, []string{"endpointslices"}, []string{"get", "list", "watch"}},
		),
		binding("ClusterRoleBinding", "system:k3s-controller", "", "ClusterRole", "system:k3s-controller", user("system:k3s-controller")),
		binding("ClusterRoleBinding", "kube-apiserver-kubelet-admin", "", "ClusterRole", "system:kubelet-api-admin", user("kube-apiserver")),
	}
}

// RBACManifest renders rbacObjects as one multi-document YAML file.
func RBACManifest() ([]byte, error) {
	var docs []string
	for _, o := range rbacObjects() {
		y, err := yaml.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("render rbac manifest: %w", err)
		}
		docs = append(docs, string(y))
	}
	return []byte("# Written by osd.\n" + strings.Join(docs, "---\n")), nil
}
