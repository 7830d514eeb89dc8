package k3s

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
)

// Node admission: which names a kubelet may register a Node under.
//
// k3s's supervisor signs a kubelet client certificate for whatever node name a bootstrap
// token holder asks (the header k3s-Node-Name): the only per-name check it makes is the
// node password, and only for a name that already has one (a member). Kubernetes cannot
// revoke the certificates it signed. So the API server itself decides, with the
// ValidatingAdmissionPolicy NodeAdmissionPolicy: a Node is created or updated by a
// system:node:NAME user only when NodeAdmissionConfigMap lists NAME as a member, or as
// joining with the digest of a bootstrap token osd issued to this join carried in the
// Node's label JoinLabel (which the joiner's kubelet sets when it registers, and nobody
// else can know before the Node exists). A join lasts as long as its join token is
// pending: a join retried with the same token (each attempt gets a new bootstrap token)
// keeps the digests of its earlier attempts, whose kubelet may already have registered. The server's own kubelet is outside the policy (it registers
// before osd can write the list). osd rewrites the list (SyncNodeAdmission) whenever a
// join starts, completes or is revoked, a member is removed, and every minute, from its
// database (members, pending join tokens) and the bootstrap tokens it issued.

// NodeAdmissionConfigMap (in kube-system) lists, as its keys, the node names a kubelet may
// register: value AdmissionMember, or AdmissionJoining followed by "@" and the Unix time
// its join token was issued, then the digests of the join's bootstrap tokens, each
// after a space ("joining @1764626400 3f2a... 9bc1...").
const NodeAdmissionConfigMap = "osd-nodes"

// NodeAdmissionPolicy is the ValidatingAdmissionPolicy (and binding) that enforces
// NodeAdmissionConfigMap on kubelets.
const NodeAdmissionPolicy = "osd-node-admission"

// JoinLabel is the Node label whose value (JoinDigest of the agent's bootstrap token)
// proves, while a join is under way, that the kubelet registering the Node is the
// joiner's.
const JoinLabel = "osd.cloud/join"

// Values of NodeAdmissionConfigMap.
const (
	AdmissionMember  = "member"
	AdmissionJoining = "joining "
)

// The CEL of NodeAdmissionPolicy, exported for the table test that evaluates it.
const (
	// NodeUserCondition selects the requests the policy judges: those of kubelets other
	// than the server's own (%q is the server's node name).
	NodeUserCondition = `request.userInfo.username.startsWith('system:node:') && request.userInfo.username != 'system:node:' + %q`
	// NodeAdmitted admits a member's Node, or a joining one carrying its join's digest.
	NodeAdmitted = `has(params.data) && object.metadata.name in params.data && (
  params.data[object.metadata.name] == 'member' ||
  (params.data[object.metadata.name].startsWith('joining ') &&
   has(object.metadata.labels) && '` + JoinLabel + `' in object.metadata.labels &&
   size(object.metadata.labels['` + JoinLabel + `']) == 40 &&
   (params.data[object.metadata.name] + ' ').contains(' ' + object.metadata.labels['` + JoinLabel + `'] + ' ')))`
	// NodeRefusalMessage says why.
	NodeRefusalMessage = `has(params.data) && object.metadata.name in params.data && params.data[object.metadata.name].startsWith('joining ') ?
  'node ' + object.metadata.name + ' is joining the osd cluster, but this kubelet is not the one its join started (its Node lacks the join label ` + JoinLabel + `): a node removed from the osd cluster keeps a kubelet certificate that cannot register again until a new join completes' :
  'node ' + object.metadata.name + ' is not a member of the osd cluster and no join for it is under way: nodes register only under a name osd admits (a node removed from the osd cluster may come back only by a new join: osd cluster add NAME on a member, then osd join)'`
)

// JoinDigest is the value of JoinLabel for a join whose agent holds bootstrap token
// token (its K10 form, or id.secret alone): a one-way digest, so that the label shown on
// the Node gives nothing that authenticates.
func JoinDigest(token string) string {
	if _, cred, ok := strings.Cut(token, "::"); ok {
		token = cred
	}
	sum := sha256.Sum256([]byte("osd-join\x00" + token))
	return hex.EncodeToString(sum[:20])
}

// nodeAdmissionObjects are NodeAdmissionPolicy and its binding, for a cluster whose
// server's node is serverNode, and NodeAdmissionConfigMap without data (osd fills it; an
// apply of the manifest leaves the keys it added). The ConfigMap comes with the policy
// because the API server resolves a binding's parameters before it evaluates the
// policy's match conditions: without it, parameterNotFoundAction Deny would refuse every
// write to a Node, the server's kubelet's and the controllers' too. With it and no data,
// every kubelet but the server's is refused (failing closed); other users (the cluster's
// controllers, osd) are not judged.
func nodeAdmissionObjects(serverNode string) []map[string]any {
	meta := map[string]any{"name": NodeAdmissionPolicy, "labels": map[string]string{"app.kubernetes.io/managed-by": "osd"}}
	return []map[string]any{
		{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": NodeAdmissionConfigMap, "namespace": "kube-system", "labels": map[string]string{"app.kubernetes.io/managed-by": "osd"}},
		},
		{
			"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": meta,
			"spec": map[string]any{
				"failurePolicy": "Fail",
				"paramKind":     map[string]string{"apiVersion": "v1", "kind": "ConfigMap"},
				"matchConstraints": map[string]any{"resourceRules": []map[string]any{{
					"apiGroups": []string{""}, "apiVersions": []string{"v1"},
					"operations": []string{"CREATE", "UPDATE"}, "resources": []string{"nodes", "nodes/status"},
				}}},
				"matchConditions": []map[string]string{{"name": "kubelets", "expression": fmt.Sprintf(NodeUserCondition, serverNode)}},
				"validations": []map[string]string{{
					"expression": NodeAdmitted, "messageExpression": NodeRefusalMessage, "reason": "Forbidden",
				}},
			},
		},
		{
			"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": meta,
			"spec": map[string]any{
				"policyName":        NodeAdmissionPolicy,
				"validationActions": []string{"Deny"},
				"paramRef": map[string]any{"name": NodeAdmissionConfigMap, "namespace": "kube-system",
					"parameterNotFoundAction": "Deny"},
			},
		},
	}
}

// AgentToken is one bootstrap token osd issued for a joining node's agent.
type AgentToken struct {
	Secret  string // its Secret's name
	Node    string
	Digest  string // JoinDigest of the token
	Expires time.Time
}

// maxJoinDigests bounds the digests one join keeps (its attempts).
const maxJoinDigests = 8

// AdmissionData is what NodeAdmissionConfigMap should hold (pure): every member that is
// not barred (removed: see RemovedNodesConfigMap), and every node with a pending join,
// barred or not. pending holds, for each node whose join token is neither used, revoked
// nor expired, when that token was issued. A pending join is admitted with the digests
// of its live agent tokens and those current (what the list holds now) recorded for the
// same join token; one with neither (no join request yet) is not. stale are the agent
// tokens to delete: expired, or of a node that is a member or whose join is not pending.
func AdmissionData(members []string, barred map[string]bool, pending map[string]time.Time, current map[string]string, tokens []AgentToken, now time.Time) (data map[string]string, stale []string) {
	data = map[string]string{}
	for _, m := range members {
		if !barred[m] {
			data[m] = AdmissionMember
		}
	}
	digests := map[string][]string{}
	for node, issued := range pending {
		if _, member := data[node]; member {
			continue
		}
		fields := strings.Fields(current[node])
		if len(fields) > 2 && fields[0] == strings.TrimSpace(AdmissionJoining) && fields[1] == joinStamp(issued) {
			digests[node] = fields[2:]
		}
	}
	// Oldest first, so that the newest attempts are the ones kept.
	tokens = slices.Clone(tokens)
	slices.SortStableFunc(tokens, func(a, b AgentToken) int { return a.Expires.Compare(b.Expires) })
	for _, t := range tokens {
		_, member := data[t.Node]
		_, isPending := pending[t.Node]
		if member || !isPending || !now.Before(t.Expires) {
			stale = append(stale, t.Secret)
			continue
		}
		if !slices.Contains(digests[t.Node], t.Digest) {
			digests[t.Node] = append(digests[t.Node], t.Digest)
		}
	}
	for node, ds := range digests {
		if len(ds) > maxJoinDigests {
			ds = ds[len(ds)-maxJoinDigests:]
		}
		data[node] = AdmissionJoining + joinStamp(pending[node]) + " " + strings.Join(ds, " ")
	}
	return data, stale
}

// JoinAdmits reports whether the list entry value admits a kubelet writing a Node that
// carries label (its JoinLabel value, "" for none) as NodeAdmitted does (pure).
func JoinAdmits(value, label string) bool {
	if value == AdmissionMember {
		return true
	}
	return strings.HasPrefix(value, AdmissionJoining) && len(label) == 40 && strings.Contains(value+" ", " "+label+" ")
}

// joinStamp names the join token issued at issued ("@" is no label value's character).
func joinStamp(issued time.Time) string { return fmt.Sprintf("@%d", issued.Unix()) }

// DeleteStaleNode deletes Node node when it exists, is not a member's, and is not admitted
// by the list's entry for it: a Node left by a join under an earlier join token, whose
// kubelet could never update it again (and whose registration would keep the new join's
// kubelet, which only registers when there is no Node, from taking the name).
func DeleteStaleNode(ctx context.Context, cs kubernetes.Interface, node string) error {
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read node %s: %w", node, err)
	}
	cm, err := cs.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, NodeAdmissionConfigMap, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read the admitted nodes: %w", err)
	}
	if JoinAdmits(cm.Data[node], n.Labels[JoinLabel]) {
		return nil
	}
	err = cs.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the stale node %s: %w", node, err)
	}
	return nil
}

// ListAgentTokens returns the bootstrap tokens osd issued (CreateAgentToken).
func ListAgentTokens(ctx context.Context, cs kubernetes.Interface) ([]AgentToken, error) {
	list, err := cs.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: agentTokenLabel})
	if err != nil {
		return nil, fmt.Errorf("list the agent tokens: %w", err)
	}
	var out []AgentToken
	for _, s := range list.Items {
		if s.Type != corev1.SecretType(bootstrapapi.SecretTypeBootstrapToken) {
			continue
		}
		id, secret := string(s.Data[bootstrapapi.BootstrapTokenIDKey]), string(s.Data[bootstrapapi.BootstrapTokenSecretKey])
		t := AgentToken{Secret: s.Name, Node: s.Labels[agentTokenLabel], Digest: JoinDigest(id + "." + secret)}
		// A token without a readable expiry counts as expired: it is deleted.
		t.Expires, _ = time.Parse(time.RFC3339, string(s.Data[bootstrapapi.BootstrapTokenExpirationKey]))
		out = append(out, t)
	}
	return out, nil
}

// SyncNodeAdmission makes NodeAdmissionConfigMap hold AdmissionData (creating it), with
// the names barred in RemovedNodesConfigMap, and deletes the stale agent tokens. Calls
// must not overlap (each writes what it computed).
func SyncNodeAdmission(ctx context.Context, cs kubernetes.Interface, members []string, pending map[string]time.Time, now time.Time) error {
	tokens, err := ListAgentTokens(ctx, cs)
	if err != nil {
		return err
	}
	barred := map[string]bool{}
	cms := cs.CoreV1().ConfigMaps(metav1.NamespaceSystem)
	removed, err := cms.Get(ctx, RemovedNodesConfigMap, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("read the removed nodes: %w", err)
	}
	if err == nil {
		for name := range removed.Data {
			barred[name] = true
		}
	}
	var stale []string
	for attempt := 0; ; attempt++ {
		cm, err := cms.Get(ctx, NodeAdmissionConfigMap, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("read the admitted nodes: %w", err)
		}
		var data map[string]string
		if err != nil {
			data, stale = AdmissionData(members, barred, pending, nil, tokens, now)
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: NodeAdmissionConfigMap, Namespace: metav1.NamespaceSystem,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "osd"}}, Data: data}
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
		} else if data, stale = AdmissionData(members, barred, pending, cm.Data, tokens, now); !maps.Equal(cm.Data, data) {
			cm.Data = data
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		}
		if err == nil {
			break
		}
		if (!apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err)) || attempt >= 5 {
			return fmt.Errorf("update the admitted nodes: %w", err)
		}
	}
	for _, name := range stale {
		err := cs.CoreV1().Secrets(metav1.NamespaceSystem).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete the stale agent token %s: %w", name, err)
		}
	}
	return nil
}
