package helmclient

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/fstest"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefakeclient "k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"
)

// testFS is a library chart and an application chart that uses it.
var testFS = fstest.MapFS{
	"lib/Chart.yaml":              {Data: []byte("apiVersion: v2\nname: lib\nversion: 0.1.0\ntype: library\n")},
	"lib/templates/_cm.tpl":       {Data: []byte("{{- define \"lib.cm\" -}}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  greeting: {{ .Values.greeting | quote }}\n{{- end -}}\n")},
	"app/Chart.yaml":              {Data: []byte("apiVersion: v2\nname: app\nversion: 1.2.3\ndependencies:\n  - name: lib\n    version: 0.1.0\n    repository: file://../lib\n")},
	"app/values.yaml":             {Data: []byte("greeting: hello\nreplicas: 1\n")},
	"app/templates/cm.yaml":       {Data: []byte("{{ include \"lib.cm\" . }}\n")},
	"app/templates/deploy.yaml":   {Data: []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  replicas: {{ .Values.replicas }}\n  selector:\n    matchLabels: {app: x}\n  template:\n    metadata:\n      labels: {app: x}\n    spec:\n      containers:\n        - name: c\n          image: img\n")},
	"broken/Chart.yaml":           {Data: []byte("apiVersion: v2\nname: broken\nversion: 0.1.0\ndependencies:\n  - name: lib\n    repository: https://example.invalid\n")},
	"broken/templates/empty.yaml": {Data: []byte("")},
}

func hashJSON(v map[string]any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}

// newTestClient uses Helm's in-memory release driver and its printing kube client: no
// cluster is the point of these tests (the controller's real-cluster test is the lead's).
func newTestClient(t *testing.T) (*Client, map[string]*action.Configuration) {
	t.Helper()
	configs := map[string]*action.Configuration{}
	c := NewWithConfigs(func(ns string) (*action.Configuration, error) {
		mem := driver.NewMemory()
		mem.SetNamespace(ns)
		ac := &action.Configuration{
			Releases:     storage.Init(mem),
			KubeClient:   &kubefake.PrintingKubeClient{Out: io.Discard},
			Capabilities: chartutil.DefaultCapabilities,
			Log:          func(string, ...any) {},
		}
		configs[ns] = ac
		return ac, nil
	}, hashJSON)
	return c, configs
}

func TestLoadChart(t *testing.T) {
	ch, digest, err := LoadChart(testFS, "app")
	if err != nil {
		t.Fatalf("LoadChart(app) error = %v", err)
	}
	if ch.Name() != "app" || len(ch.Dependencies()) != 1 || ch.Dependencies()[0].Name() != "lib" {
		t.Fatalf("LoadChart(app) = %s with %d deps, want app with lib", ch.Name(), len(ch.Dependencies()))
	}
	_, again, _ := LoadChart(testFS, "app")
	if len(digest) != 64 || digest != again {
		t.Fatalf("LoadChart(app) digest = %q then %q, want one stable sha256", digest, again)
	}
	changed := fstest.MapFS{}
	for k, v := range testFS {
		changed[k] = v
	}
	changed["lib/templates/_cm.tpl"] = &fstest.MapFile{Data: []byte("{{- define \"lib.cm\" -}}\n{{- end -}}\n")}
	if _, d2, _ := LoadChart(changed, "app"); d2 == digest {
		t.Fatalf("LoadChart() digest unchanged after a library template changed")
	}
	if _, _, err := LoadChart(testFS, "broken"); err == nil || !strings.Contains(err.Error(), "file://../") {
		t.Fatalf("LoadChart(broken) error = %v, want repository error", err)
	}
	if _, _, err := LoadChart(testFS, "missing"); err == nil {
		t.Fatalf("LoadChart(missing) error = nil, want error")
	}
}

func TestApplyGetUninstall(t *testing.T) {
	ctx := context.Background()
	c, configs := newTestClient(t)
	ch, _, err := LoadChart(testFS, "app")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get("ns1", "web"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(missing) error = %v, want ErrNotFound", err)
	}
	v1 := map[string]any{"greeting": "hi"}
	h1, _ := hashJSON(v1)
	r, err := c.Apply(ctx, ch, "ns1", "web", v1)
	if err != nil {
		t.Fatalf("Apply() error = %v", err)
	}
	if r.Revision != 1 || r.Status != "deployed" || r.ValuesHash != h1 || r.Chart != "app" || r.ChartVersion != "1.2.3" || r.Namespace != "ns1" {
		t.Fatalf("Apply() = %+v, want revision 1 deployed app 1.2.3 hash %s", r, h1)
	}
	got, err := c.Get("ns1", "web")
	if err != nil || got != r {
		t.Fatalf("Get() = %+v, %v, want %+v", got, err, r)
	}
	rel, _ := configs["ns1"].Releases.Last("web")
	if !strings.Contains(rel.Manifest, "greeting: \"hi\"") || !strings.Contains(rel.Manifest, "kind: Deployment") {
		t.Fatalf("manifest = %q, want the library ConfigMap with greeting hi and the Deployment", rel.Manifest)
	}
	for _, doc := range strings.Split(rel.Manifest, "\n---\n") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("manifest document does not parse: %v\n%s", err, doc)
		}
	}

	v2 := map[string]any{"greeting": "bye", "replicas": nil}
	h2, _ := hashJSON(v2)
	r, err = c.Apply(ctx, ch, "ns1", "web", v2)
	if err != nil || r.Revision != 2 || r.ValuesHash != h2 {
		t.Fatalf("Apply(changed) = %+v, %v, want revision 2 hash %s", r, err, h2)
	}

	// A revision left pending by a killed process is marked failed and superseded.
	last, _ := configs["ns1"].Releases.Last("web")
	last.Info.Status = release.StatusPendingUpgrade
	if err := configs["ns1"].Releases.Update(last); err != nil {
		t.Fatal(err)
	}
	if g, _ := c.Get("ns1", "web"); g.ValuesHash != "" || g.Status != "pending-upgrade" {
		t.Fatalf("Get(pending) = %+v, want empty hash and pending-upgrade", g)
	}
	r, err = c.Apply(ctx, ch, "ns1", "web", v2)
	if err != nil || r.Revision != 3 || r.Status != "deployed" {
		t.Fatalf("Apply(after pending) = %+v, %v, want revision 3 deployed", r, err)
	}

	// Release namespaces are separate stores.
	if _, err := c.Get("ns2", "web"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(ns2) error = %v, want ErrNotFound", err)
	}
	if err := c.Uninstall("ns1", "web"); err != nil {
		t.Fatalf("Uninstall() error = %v", err)
	}
	if _, err := c.Get("ns1", "web"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(uninstalled) error = %v, want ErrNotFound", err)
	}
	if err := c.Uninstall("ns1", "web"); err != nil {
		t.Fatalf("Uninstall(missing) error = %v, want nil", err)
	}
}

func TestApplyRetriesFailedInstall(t *testing.T) {
	ctx := context.Background()
	c, configs := newTestClient(t)
	ch, _, _ := LoadChart(testFS, "app")
	if _, err := c.Apply(ctx, ch, "ns1", "web", nil); err != nil {
		t.Fatal(err)
	}
	last, _ := configs["ns1"].Releases.Last("web")
	last.Info.Status = release.StatusPendingInstall // killed during the first install
	_ = configs["ns1"].Releases.Update(last)
	r, err := c.Apply(ctx, ch, "ns1", "web", nil)
	if err != nil || r.Revision != 2 || r.Status != "deployed" {
		t.Fatalf("Apply(after interrupted install) = %+v, %v, want revision 2 deployed", r, err)
	}
}

func TestTemplate(t *testing.T) {
	ch, _, _ := LoadChart(testFS, "app")
	out, err := Template(context.Background(), ch, "ns1", "web", map[string]any{"replicas": 3})
	if err != nil {
		t.Fatalf("Template() error = %v", err)
	}
	if !strings.Contains(out, "replicas: 3") || !strings.Contains(out, "kind: ConfigMap") {
		t.Fatalf("Template() = %q, want replicas 3 and a ConfigMap", out)
	}
}

// TestValuesHashSurvivesSecretStorage stores a release with Helm's Secret driver (JSON,
// gzip, base64 in a Secret; client-go's fake clientset holds the Secret since no API server
// runs in go test) and reads it back through a new Client: the values hash must be the one
// computed before storage, whatever Go types the values had, or every re-run would upgrade.
// secretsConfigs keeps releases as Secrets (Helm's default driver) in store, a fake clientset.
func secretsConfigs(store *kubefakeclient.Clientset) func(ns string) (*action.Configuration, error) {
	return func(ns string) (*action.Configuration, error) {
		return &action.Configuration{
			Releases:     storage.Init(driver.NewSecrets(store.CoreV1().Secrets(ns))),
			KubeClient:   &kubefake.PrintingKubeClient{Out: io.Discard},
			Capabilities: chartutil.DefaultCapabilities,
			Log:          func(string, ...any) {},
		}, nil
	}
}

func TestValuesHashSurvivesSecretStorage(t *testing.T) {
	store := kubefakeclient.NewSimpleClientset()
	newCfg := secretsConfigs(store)
	vals := map[string]any{"replicas": 1, "ratio": 0.2, "big": int64(1) << 40, "gone": nil,
		"nested": map[string]any{"list": []any{"a", 2, true}, "s": "x"}}
	want, _ := hashJSON(vals)
	ch, _, _ := LoadChart(testFS, "app")
	if _, err := NewWithConfigs(newCfg, hashJSON).Apply(context.Background(), ch, "ns1", "web", vals); err != nil {
		t.Fatal(err)
	}
	got, err := NewWithConfigs(newCfg, hashJSON).Get("ns1", "web")
	if err != nil || got.ValuesHash != want {
		t.Fatalf("Get() after Secret storage hash = %q, %v, want %q", got.ValuesHash, err, want)
	}
}

// TestApplyLeavesChartAndValuesAlone: Helm coalesces values in place (adding dependency
// "global" maps); Apply must not let that reach the caller's chart or values, or the next
// pass would see different values and upgrade a converged release.
func TestApplyLeavesChartAndValuesAlone(t *testing.T) {
	c, _ := newTestClient(t)
	ch, _, err := LoadChart(testFS, "app")
	if err != nil {
		t.Fatal(err)
	}
	before, _ := json.Marshal(ch.Values)
	vals := map[string]any{"greeting": "hi"}
	valsBefore, _ := json.Marshal(vals)
	if _, err := c.Apply(context.Background(), ch, "ns1", "web", vals); err != nil {
		t.Fatal(err)
	}
	after, _ := json.Marshal(ch.Values)
	valsAfter, _ := json.Marshal(vals)
	if string(before) != string(after) {
		t.Errorf("chart values after Apply = %s, want unchanged %s", after, before)
	}
	if string(valsBefore) != string(valsAfter) {
		t.Errorf("values after Apply = %s, want unchanged %s", valsAfter, valsBefore)
	}
}

// TestGetReadsReleaseOnceWhileRecordsStay: Get decodes a release again only when its
// records (the Secrets and their resource versions) changed.
func TestGetReadsReleaseOnceWhileRecordsStay(t *testing.T) {
	store := kubefakeclient.NewSimpleClientset()
	newCfg := secretsConfigs(store)
	c := NewWithConfigs(newCfg, hashJSON)
	listed := 0
	c.records = func(ns, name string) (string, error) {
		listed++
		list, err := store.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
		if err != nil {
			return "", err
		}
		var keys []string
		for _, s := range list.Items {
			keys = append(keys, s.Name+"@"+s.ResourceVersion)
		}
		return recordsKey(keys), nil
	}
	// reads counts the Helm driver's reads of the records (lists of Secrets not made by
	// c.records).
	reads := func() int {
		n := 0
		for _, a := range store.Actions() {
			if a.GetVerb() == "list" && a.GetResource().Resource == "secrets" {
				n++
			}
		}
		return n - listed
	}
	ch, _, _ := LoadChart(testFS, "app")
	if _, err := c.Apply(context.Background(), ch, "ns1", "web", map[string]any{"replicas": 1}); err != nil {
		t.Fatal(err)
	}
	first, err := c.Get("ns1", "web")
	if err != nil || first.Revision != 1 {
		t.Fatalf("Get() = revision %d, %v; want 1", first.Revision, err)
	}
	before := reads()
	for i := 0; i < 3; i++ {
		again, err := c.Get("ns1", "web")
		if err != nil || again != first {
			t.Fatalf("Get() again = %+v, %v; want %+v", again, err, first)
		}
	}
	if got := reads() - before; got != 0 {
		t.Errorf("Get() with the same records read the release %d more times, want 0", got)
	}
	// A new revision: new records, read again.
	if _, err := c.Apply(context.Background(), ch, "ns1", "web", map[string]any{"replicas": 2}); err != nil {
		t.Fatal(err)
	}
	before = reads()
	second, err := c.Get("ns1", "web")
	if err != nil || second.Revision != 2 || second.ValuesHash == first.ValuesHash {
		t.Fatalf("Get() after an upgrade = %+v, %v; want revision 2 with the new values' hash", second, err)
	}
	if reads() == before {
		t.Errorf("Get() after an upgrade did not read the release again")
	}
	// Records that cannot be listed: read every time.
	c.records = func(string, string) (string, error) { return "", errors.New("no API") }
	before = reads()
	if _, err := c.Get("ns1", "web"); err != nil {
		t.Fatal(err)
	}
	if reads() == before {
		t.Errorf("Get() without a list of the records used its cache")
	}
}
