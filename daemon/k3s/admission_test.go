package k3s

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	authuser "k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// evalCEL evaluates expr (a CEL expression of NodeAdmissionPolicy or of the removed-nodes
// policy) as the API server does: compiled by its admission CEL compiler (the
// environment of new expressions, strict cost) with params declared, and run on a write
// of the Node vars["object"] by vars["request"]'s user with vars["params"] (a ConfigMap's
// data, or nil for a ConfigMap without data). It returns the result's value or the error.
func evalCEL(t *testing.T, expr string, vars map[string]any) any {
	t.Helper()
	obj := vars["object"].(map[string]any)["metadata"].(map[string]any)
	node := &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}, ObjectMeta: metav1.ObjectMeta{Name: obj["name"].(string)}}
	if labels, ok := obj["labels"].(map[string]any); ok {
		node.Labels = map[string]string{}
		for k, v := range labels {
			node.Labels[k] = v.(string)
		}
	}
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: NodeAdmissionConfigMap, Namespace: "kube-system"}}
	if data, ok := vars["params"].(map[string]any)["data"].(map[string]any); ok {
		cm.Data = map[string]string{}
		for k, v := range data {
			cm.Data[k] = v.(string)
		}
	}
	username := vars["request"].(map[string]any)["userInfo"].(map[string]any)["username"].(string)

	env := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion(), true)
	var acc plugincel.ExpressionAccessor = &validating.ValidationCondition{Expression: expr}
	if expr == NodeRefusalMessage {
		acc = &validating.MessageExpressionCondition{MessageExpression: expr}
	}
	f := plugincel.NewConditionCompiler(env).CompileCondition([]plugincel.ExpressionAccessor{acc},
		plugincel.OptionalVariableDeclarations{HasParams: true, StrictCost: true}, environment.NewExpressions)
	gvk, gvr := corev1.SchemeGroupVersion.WithKind("Node"), corev1.SchemeGroupVersion.WithResource("nodes")
	attr := admission.NewAttributesRecord(node, nil, gvk, "", node.Name, gvr, "", admission.Create, &metav1.CreateOptions{}, false, &authuser.DefaultInfo{Name: username})
	va, err := admission.NewVersionedAttributes(attr, gvk, admission.NewObjectInterfacesFromScheme(clientgoscheme.Scheme))
	if err != nil {
		t.Fatal(err)
	}
	results, _, err := f.ForInput(context.Background(), va, plugincel.CreateAdmissionRequest(attr, metav1.GroupVersionResource(gvr), metav1.GroupVersionKind(gvk)),
		plugincel.OptionalVariableBindings{VersionedParams: cm}, nil, celconfig.RuntimeCELCostBudget)
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	if results[0].Error != nil {
		if strings.Contains(results[0].Error.Error(), "compilation failed") {
			t.Fatalf("compile %s: %v", expr, results[0].Error)
		}
		return results[0].Error
	}
	return results[0].EvalResult.Value()
}

func nodeObject(name string, labels map[string]any) map[string]any {
	meta := map[string]any{"name": name}
	if labels != nil {
		meta["labels"] = labels
	}
	return map[string]any{"metadata": meta}
}

func TestNodeAdmissionCEL(t *testing.T) {
	tok := "K10cafe::abcdef.0123456789abcdef"
	digest := JoinDigest(tok)
	earlier := JoinDigest("K10cafe::abcdef.0000000000000000") // an earlier attempt of n3's join
	params := map[string]any{"data": map[string]any{
		"n2": AdmissionMember, "n3": AdmissionJoining + "@1764626400 " + earlier + " " + digest, "n4": AdmissionJoining + "@1764626400 " + JoinDigest("K10cafe::zzzzzz.otherotherother0"),
		"n5": AdmissionJoining + "@1764626400 " + earlier,
	}}
	for _, tt := range []struct {
		name   string
		user   string
		object map[string]any
		params map[string]any
		judged bool // the match condition selects the request
		admit  bool
		msg    string // in the refusal message
	}{
		{"a member's kubelet", "system:node:n2", nodeObject("n2", nil), params, true, true, ""},
		{"the server's kubelet, before any list", "system:node:n1", nodeObject("n1", nil), map[string]any{}, false, false, ""},
		{"the joining kubelet with its join's label", "system:node:n3", nodeObject("n3", map[string]any{JoinLabel: digest}), params, true, true, ""},
		{"the kubelet of an earlier attempt of the same join", "system:node:n5", nodeObject("n5", map[string]any{JoinLabel: earlier}), params, true, true, ""},
		{"a label naming the join token's stamp", "system:node:n3", nodeObject("n3", map[string]any{JoinLabel: "@1764626400"}), params, true, false, "not the one its join started"},
		{"a label naming part of a digest", "system:node:n3", nodeObject("n3", map[string]any{JoinLabel: digest[:20]}), params, true, false, "not the one its join started"},
		{"a kubelet of the joining name without the label (a removed node's kept certificate)", "system:node:n3", nodeObject("n3", map[string]any{"x": "y"}), params, true, false, "not the one its join started"},
		{"a kubelet of the joining name with no labels at all", "system:node:n3", nodeObject("n3", nil), params, true, false, "not the one its join started"},
		{"a kubelet with another join's digest", "system:node:n4", nodeObject("n4", map[string]any{JoinLabel: digest}), params, true, false, "not the one its join started"},
		{"a name osd never admitted (minted with another node's join credential)", "system:node:node-b", nodeObject("node-b", map[string]any{JoinLabel: digest}), params, true, false, "not a member of the osd cluster"},
		{"an empty list", "system:node:n2", nodeObject("n2", nil), map[string]any{}, true, false, "not a member"},
		{"an admin", "system:admin", nodeObject("node-b", nil), map[string]any{}, false, false, ""},
		{"the cloud controller", "k3s-cloud-controller-manager", nodeObject("node-b", nil), params, false, false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			vars := map[string]any{"object": tt.object, "params": tt.params, "request": map[string]any{"userInfo": map[string]any{"username": tt.user}}}
			cond := fmt.Sprintf(NodeUserCondition, "n1")
			if got := evalCEL(t, cond, vars); got != tt.judged {
				t.Fatalf("matchCondition %s for %s = %v, want %v", cond, tt.user, got, tt.judged)
			}
			if !tt.judged {
				return
			}
			if got := evalCEL(t, NodeAdmitted, vars); got != tt.admit {
				t.Fatalf("NodeAdmitted(%s, %v) = %v, want %v", tt.user, tt.object, got, tt.admit)
			}
			data, _ := tt.params["data"].(map[string]any)
			value, _ := data[tt.object["metadata"].(map[string]any)["name"].(string)].(string)
			label := ""
			if labels, ok := tt.object["metadata"].(map[string]any)["labels"].(map[string]any); ok {
				label, _ = labels[JoinLabel].(string)
			}
			if got := JoinAdmits(value, label); got != tt.admit {
				t.Errorf("JoinAdmits(%q, %q) = %v, want %v as the policy decides", value, label, got, tt.admit)
			}
			if tt.admit {
				return
			}
			if got, ok := evalCEL(t, NodeRefusalMessage, vars).(string); !ok || !strings.Contains(got, tt.msg) {
				t.Errorf("NodeRefusalMessage = %q (%v), want it to contain %q", got, evalCEL(t, NodeRefusalMessage, vars), tt.msg)
			}
		})
	}
}

// TestRemovedNodesCEL: the removed-nodes policy bars a removed name for everyone but
// kubelets (NodeAdmissionPolicy judges those, more strictly).
func TestRemovedNodesCEL(t *testing.T) {
	objs := nodeGuardObjects()
	spec := objs[0]["spec"].(map[string]any)
	cond := spec["matchConditions"].([]map[string]string)[0]["expression"]
	expr := spec["validations"].([]map[string]string)[0]["expression"]
	removed := map[string]any{"data": map[string]any{"n2": "2026-12-01T00:00:00Z"}}
	for _, tt := range []struct {
		user, node string
		params     map[string]any
		judged     bool
		admit      bool
	}{
		{"system:admin", "n2", removed, true, false},
		{"system:admin", "n3", removed, true, true},
		{"system:admin", "n2", map[string]any{}, true, true},
		{"system:node:n2", "n2", removed, false, false},
	} {
		vars := map[string]any{"object": nodeObject(tt.node, nil), "params": tt.params, "request": map[string]any{"userInfo": map[string]any{"username": tt.user}}}
		if got := evalCEL(t, cond, vars); got != tt.judged {
			t.Errorf("removed-nodes matchCondition for %s = %v, want %v", tt.user, got, tt.judged)
			continue
		}
		if tt.judged {
			if got := evalCEL(t, expr, vars); got != tt.admit {
				t.Errorf("removed-nodes validation for %s creating %s with %v = %v, want %v", tt.user, tt.node, tt.params, got, tt.admit)
			}
		}
	}
}

func TestNodeAdmissionManifest(t *testing.T) {
	got, err := RBACManifest("osd-1")
	if err != nil {
		t.Fatal(err)
	}
	var policy, binding struct {
		Kind string
		Spec struct {
			FailurePolicy    string
			MatchConstraints struct {
				ResourceRules []struct{ Operations, Resources []string }
			}
			MatchConditions []struct{ Expression string }
			ParamRef        struct{ Name, Namespace, ParameterNotFoundAction string }
		}
	}
	for _, d := range strings.Split(string(got), "\n---\n") {
		if !strings.Contains(d, "name: "+NodeAdmissionPolicy) {
			continue
		}
		if strings.Contains(d, "kind: ValidatingAdmissionPolicyBinding") {
			if err := yaml.Unmarshal([]byte(d), &binding); err != nil {
				t.Fatal(err)
			}
		} else if err := yaml.Unmarshal([]byte(d), &policy); err != nil {
			t.Fatal(err)
		}
	}
	if policy.Kind != "ValidatingAdmissionPolicy" || policy.Spec.FailurePolicy != "Fail" || len(policy.Spec.MatchConstraints.ResourceRules) != 1 {
		t.Fatalf("RBACManifest() policy %s = %+v, want a ValidatingAdmissionPolicy failing closed", NodeAdmissionPolicy, policy)
	}
	r := policy.Spec.MatchConstraints.ResourceRules[0]
	if !slices.Equal(r.Operations, []string{"CREATE", "UPDATE"}) || !slices.Equal(r.Resources, []string{"nodes", "nodes/status"}) {
		t.Errorf("policy rules = %+v, want CREATE and UPDATE of nodes and nodes/status", r)
	}
	if len(policy.Spec.MatchConditions) != 1 || !strings.Contains(policy.Spec.MatchConditions[0].Expression, `"osd-1"`) {
		t.Errorf("policy match conditions = %+v, want the server's kubelet osd-1 left out", policy.Spec.MatchConditions)
	}
	if p := binding.Spec.ParamRef; binding.Kind != "ValidatingAdmissionPolicyBinding" || p.Name != NodeAdmissionConfigMap || p.Namespace != "kube-system" || p.ParameterNotFoundAction != "Deny" {
		t.Errorf("binding = %+v, want params %s in kube-system, denying when it is missing", binding, NodeAdmissionConfigMap)
	}
	if !strings.Contains(string(got), "kind: ConfigMap\nmetadata:\n  labels:\n    app.kubernetes.io/managed-by: osd\n  name: "+NodeAdmissionConfigMap+"\n  namespace: kube-system\n") {
		t.Errorf("RBACManifest() lacks the ConfigMap %s (without it the binding's Deny refuses every Node write):\n%s", NodeAdmissionConfigMap, got)
	}
	if _, err := RBACManifest(""); err == nil {
		t.Error(`RBACManifest("") = nil error, want one: the server's kubelet must be named`)
	}
}

func TestJoinDigest(t *testing.T) {
	a := JoinDigest("K10cafe::abcdef.0123456789abcdef")
	if b := JoinDigest("abcdef.0123456789abcdef"); a != b {
		t.Errorf("JoinDigest(K10 form) = %s, JoinDigest(id.secret) = %s, want the same", a, b)
	}
	if len(a) != 40 || strings.Contains(a, "0123456789abcdef") {
		t.Errorf("JoinDigest = %q, want 40 hex characters revealing nothing of the token", a)
	}
	if c := JoinDigest("K10cafe::abcdef.0123456789abcdeg"); c == a {
		t.Errorf("JoinDigest of two tokens = %s for both", a)
	}
}

func TestAdmissionData(t *testing.T) {
	now := time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC)
	issued, reissued := now.Add(-5*time.Minute), now.Add(-time.Minute)
	stamp, restamp := joinStamp(issued), joinStamp(reissued)
	live, dead := now.Add(10*time.Minute), now.Add(-time.Second)
	tok := func(secret, node string, exp time.Time) AgentToken {
		return AgentToken{Secret: secret, Node: node, Digest: "d-" + secret, Expires: exp}
	}
	for _, tt := range []struct {
		name      string
		members   []string
		barred    map[string]bool
		pending   map[string]time.Time
		current   map[string]string
		tokens    []AgentToken
		want      map[string]string
		wantStale []string
	}{
		{name: "the server alone", members: []string{"n1"}, want: map[string]string{"n1": AdmissionMember}},
		{name: "a join under way", members: []string{"n1"}, pending: map[string]time.Time{"n3": issued}, tokens: []AgentToken{tok("s3", "n3", live)},
			want: map[string]string{"n1": AdmissionMember, "n3": AdmissionJoining + stamp + " d-s3"}},
		{name: "a token issued, no join request yet", members: []string{"n1"}, pending: map[string]time.Time{"n3": issued},
			want: map[string]string{"n1": AdmissionMember}},
		{name: "a retried join keeps its earlier attempt's digest", members: []string{"n1"}, pending: map[string]time.Time{"n3": issued},
			current: map[string]string{"n3": AdmissionJoining + stamp + " d-old"}, tokens: []AgentToken{tok("new", "n3", live)},
			want: map[string]string{"n1": AdmissionMember, "n3": AdmissionJoining + stamp + " d-old d-new"}},
		{name: "a join whose agent token expired, its join token still pending", members: []string{"n1"}, pending: map[string]time.Time{"n3": issued},
			current: map[string]string{"n3": AdmissionJoining + stamp + " d-s3"}, tokens: []AgentToken{tok("s3", "n3", dead)},
			want: map[string]string{"n1": AdmissionMember, "n3": AdmissionJoining + stamp + " d-s3"}, wantStale: []string{"s3"}},
		{name: "a new join token forgets the digests of the one before", members: []string{"n1"}, pending: map[string]time.Time{"n3": reissued},
			current: map[string]string{"n3": AdmissionJoining + stamp + " d-old"}, tokens: []AgentToken{tok("new", "n3", live)},
			want: map[string]string{"n1": AdmissionMember, "n3": AdmissionJoining + restamp + " d-new"}},
		{name: "a revoked or expired join token", members: []string{"n1"}, current: map[string]string{"n3": AdmissionJoining + stamp + " d-s3"},
			tokens: []AgentToken{tok("s3", "n3", live)}, want: map[string]string{"n1": AdmissionMember}, wantStale: []string{"s3"}},
		{name: "a completed join", members: []string{"n1", "n3"}, current: map[string]string{"n3": AdmissionJoining + stamp + " d-s3"},
			tokens: []AgentToken{tok("s3", "n3", live)}, want: map[string]string{"n1": AdmissionMember, "n3": AdmissionMember}, wantStale: []string{"s3"}},
		{name: "a member being removed (barred)", members: []string{"n1", "n2"}, barred: map[string]bool{"n2": true},
			current: map[string]string{"n2": AdmissionMember}, want: map[string]string{"n1": AdmissionMember}},
		{name: "a removed name joining again", members: []string{"n1"}, barred: map[string]bool{"n2": true}, pending: map[string]time.Time{"n2": issued},
			tokens: []AgentToken{tok("s2", "n2", live)}, want: map[string]string{"n1": AdmissionMember, "n2": AdmissionJoining + stamp + " d-s2"}},
		{name: "a garbled entry", members: []string{"n1"}, pending: map[string]time.Time{"n3": issued}, current: map[string]string{"n3": "joining"},
			want: map[string]string{"n1": AdmissionMember}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, stale := AdmissionData(tt.members, tt.barred, tt.pending, tt.current, tt.tokens, now)
			if !maps.Equal(got, tt.want) || !slices.Equal(stale, tt.wantStale) {
				t.Errorf("AdmissionData() = %v, stale %v, want %v, stale %v", got, stale, tt.want, tt.wantStale)
			}
		})
	}
	var many []AgentToken
	for i := range maxJoinDigests + 3 {
		many = append(many, tok(fmt.Sprint(i), "n3", live.Add(time.Duration(i)*time.Second)))
	}
	got, _ := AdmissionData(nil, nil, map[string]time.Time{"n3": issued}, nil, many, now)
	if f := strings.Fields(got["n3"]); len(f) != 2+maxJoinDigests || f[len(f)-1] != "d-"+fmt.Sprint(maxJoinDigests+2) {
		t.Errorf("AdmissionData(%d attempts) = %q, want the newest %d digests", len(many), got["n3"], maxJoinDigests)
	}
}
