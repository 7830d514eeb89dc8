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

// RemovedNodesConfigMap (in kube-system) lists, as its keys, the nodes removed from the
// cluster that may not register again until a new join of that name completes.
const RemovedNodesConfigMap = "osd-removed-nodes"

// nodeGuardObjects refuse to create a Node whose name is a key of RemovedNodesConfigMap,
// whoever asks but a kubelet: a removed node keeps its kubelet certificate (Kubernetes
// cannot revoke it), and the node authorizer would otherwise let that certificate create
// its Node again. Kubelets are judged by the stricter NodeAdmissionPolicy instead (which
// lets the kubelet of a new join of that name register before the join completes, and
// refuses the removed node's); this policy bars the name for everyone else.
func nodeGuardObjects() []map[string]any {
	const name = "osd-removed-nodes"
	meta := map[string]any{"name": name, "labels": map[string]string{"app.kubernetes.io/managed-by": "osd"}}
	return []map[string]any{
		{
			"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": meta,
			"spec": map[string]any{
				"failurePolicy": "Fail",
				"paramKind":     map[string]string{"apiVersion": "v1", "kind": "ConfigMap"},
				"matchConstraints": map[string]any{"resourceRules": []map[string]any{{
					"apiGroups": []string{""}, "apiVersions": []string{"v1"},
					"operations": []string{"CREATE"}, "resources": []string{"nodes"},
				}}},
				"matchConditions": []map[string]string{{"name": "not-kubelets", "expression": "!request.userInfo.username.startsWith('system:node:')"}},
				"validations": []map[string]string{{
					"expression": "!has(params.data) || !(object.metadata.name in params.data)",
					"message":    "this node was removed from the osd cluster: it may come back only by a new join (osd cluster add NAME on a member, then osd join), and only once that join completes",
					"reason":     "Forbidden",
				}},
			},
		},
		{
			"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": meta,
			"spec": map[string]any{
				"policyName":        name,
				"validationActions": []string{"Deny"},
				"paramRef": map[string]any{"name": RemovedNodesConfigMap, "namespace": "kube-system",
					"parameterNotFoundAction": "Allow"},
			},
		},
	}
}

// RBACManifest renders rbacObjects, nodeGuardObjects and nodeAdmissionObjects (for a
// cluster whose server's node is serverNode) as one multi-document YAML file.
func RBACManifest(serverNode string) ([]byte, error) {
	if serverNode == "" {
		return nil, fmt.Errorf("render rbac manifest: no server node name")
	}
	objs := append(append(rbacObjects(), nodeGuardObjects()...), nodeAdmissionObjects(serverNode)...)
	var docs []string
	for _, o := range objs {
		y, err := yaml.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("render rbac manifest: %w", err)
		}
		docs = append(docs, string(y))
	}
	return []byte("# Written by osd.\n" + strings.Join(docs, "---\n")), nil
}
