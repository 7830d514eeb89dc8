package deploy

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/osdcloud/osd/daemon/deploy/helmclient"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
)

// Three tiny charts standing in for the real ones (rendered and checked in package charts).
var ctrlCharts = fstest.MapFS{
	"db/Chart.yaml":              {Data: []byte("apiVersion: v2\nname: db\nversion: 0.1.0\n")},
	"db/values.yaml":             {Data: []byte("size: 1\nimages: {}\n")},
	"db/templates/cm.yaml":       {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: db\ndata:\n  size: {{ .Values.size | quote }}\n  image: {{ .Values.images.db }}\n")},
	"api/Chart.yaml":             {Data: []byte("apiVersion: v2\nname: api\nversion: 0.2.0\n")},
	"api/values.yaml":            {Data: []byte("debug: false\nimages: {}\n")},
	"api/templates/cm.yaml":      {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: api\ndata:\n  debug: {{ .Values.debug | quote }}\n")},
	"cache/Chart.yaml":           {Data: []byte("apiVersion: v2\nname: cache\nversion: 0.1.0\n")},
	"cache/templates/empty.yaml": {Data: []byte("# nothing\n")},
}

var ctrlCatalog = Catalog{Services: []Service{
	{Name: "db", Chart: "db", Namespace: "osd-test", Enabled: true, Images: []string{"db"}},
	{Name: "cache", Chart: "cache", Namespace: "osd-test", Enabled: true},
	{Name: "api", Chart: "api", Namespace: "osd-test", DependsOn: []string{"db", "cache"}, Enabled: true},
	{Name: "later", Chart: "missing", Namespace: "osd-test", DependsOn: []string{"api"}},
}}

type ctrlEnv struct {
	c       *Controller
	kube    *fake.Clientset
	configs map[string]*action.Configuration
}

// newCtrlEnv wires the controller to fakes: no Kubernetes can run inside `go test` here, so
// the API server is client-go's fake clientsets and Helm uses its in-memory driver and
// printing kube client. The same controller against k3s is the daemon's integration test.
func newCtrlEnv(t *testing.T, spec DeploymentSpec) *ctrlEnv {
	t.Helper()
	dep := &OpenStackDeployment{ObjectMeta: metav1.ObjectMeta{Name: DefaultName, Namespace: "osd-test", Generation: 1}, Spec: spec}
	u, err := ToUnstructured(dep)
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{GVR: Kind + "List"}, u)
	configs := map[string]*action.Configuration{}
	helm := helmclient.NewWithConfigs(func(ns string) (*action.Configuration, error) {
		mem := driver.NewMemory()
		mem.SetNamespace(ns)
		configs[ns] = &action.Configuration{Releases: storage.Init(mem), KubeClient: &kubefake.PrintingKubeClient{Out: io.Discard},
			Capabilities: chartutil.DefaultCapabilities, Log: func(string, ...any) {}}
		return configs[ns], nil
	}, ValuesHash)
	kube := fake.NewSimpleClientset()
	c := &Controller{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Kube: kube, Dynamic: dyn, Helm: helm, Charts: ctrlCharts, Catalog: ctrlCatalog, Namespace: "osd-test",
		Secrets: []SecretSpec{{Name: "db-root", Keys: map[string]KeyFormat{"password": FormatHex}}}}
	return &ctrlEnv{c: c, kube: kube, configs: configs}
}

func helmAnno(rel string) map[string]string {
	return map[string]string{annoReleaseName: rel, annoReleaseNamespace: "osd-test"}
}

// workload creates what the release's chart would run, ready or not.
func (e *ctrlEnv) workload(t *testing.T, rel string, ready bool) {
	t.Helper()
	one := int32(1)
	avail := int32(0)
	if ready {
		avail = 1
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: rel, Namespace: "osd-test", Annotations: helmAnno(rel), Generation: 1},
		Spec:   appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": rel}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: avail}}
	ctx := context.Background()
	if _, err := e.kube.AppsV1().Deployments("osd-test").Get(ctx, rel, metav1.GetOptions{}); err == nil {
		if _, err := e.kube.AppsV1().Deployments("osd-test").Update(ctx, d, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := e.kube.AppsV1().Deployments("osd-test").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (e *ctrlEnv) revision(t *testing.T, rel string) int {
	t.Helper()
	r, err := e.configs["osd-test"].Releases.Last(rel)
	if err != nil {
		t.Fatalf("release %s: %v", rel, err)
	}
	return r.Version
}

func actionsOf(res Result) string {
	var s []string
	for _, a := range res.Actions {
		s = append(s, string(a.Op)+" "+a.Service)
	}
	return strings.Join(s, ",")
}

func TestControllerConverges(t *testing.T) {
	ctx := context.Background()
	e := newCtrlEnv(t, DeploymentSpec{Images: map[string]string{"db": "localhost/db:1"}})

	res, err := e.c.Reconcile(ctx)
	if err != nil {
		t.Fatalf("Reconcile() error = %v", err)
	}
	if got := actionsOf(res); got != "install cache,install db" {
		t.Fatalf("Reconcile() #1 actions = %q, want install cache,install db", got)
	}
	if st := res.Status.Children["api"]; st.State != StateWaiting || st.Message != "waiting for cache, db" {
		t.Fatalf("children[api] = %+v, want waiting for cache, db", st)
	}
	if _, ok := res.Status.Children["later"]; ok {
		t.Fatalf("disabled service later has a child status")
	}
	if s, err := e.kube.CoreV1().Secrets("osd-test").Get(ctx, "db-root", metav1.GetOptions{}); err != nil || len(s.Data["password"]) != 64 {
		t.Fatalf("secret db-root not generated before the releases: %v", err)
	}

	// Nothing ready yet: no action, still waiting.
	res, _ = e.c.Reconcile(ctx)
	if res.Ready || len(res.Actions) != 0 || res.Status.Children["db"].State != StateInstalling {
		t.Fatalf("Reconcile() #2 = ready %v actions %q db %+v, want not ready, none, installing", res.Ready, actionsOf(res), res.Status.Children["db"])
	}
	e.workload(t, "db", true)
	e.workload(t, "cache", false)
	res, _ = e.c.Reconcile(ctx)
	if len(res.Actions) != 0 || res.Status.Children["db"].State != StateReady {
		t.Fatalf("Reconcile() #3 actions %q db %+v, want none and db ready", actionsOf(res), res.Status.Children["db"])
	}
	if h := res.Status.Health["Deployment/osd-test/cache"]; h.Reason != "0 of 1 available, 1 updated" || h.Release != "cache" {
		t.Fatalf("health[cache] = %+v, want not available", h)
	}
	e.workload(t, "cache", true)
	res, _ = e.c.Reconcile(ctx)
	if got := actionsOf(res); got != "install api" {
		t.Fatalf("Reconcile() #4 actions = %q, want install api", got)
	}
	e.workload(t, "api", true)
	res, err = e.c.Reconcile(ctx)
	if err != nil || !res.Ready {
		t.Fatalf("Reconcile() #5 = ready %v, %v; status %+v", res.Ready, err, res.Status.Children)
	}
	cond := map[string]metav1.ConditionStatus{}
	for _, c := range res.Status.Conditions {
		cond[c.Type] = c.Status
	}
	if cond[ConditionReady] != metav1.ConditionTrue || cond[ConditionDegraded] != metav1.ConditionFalse || cond[ConditionProgressing] != metav1.ConditionFalse {
		t.Fatalf("conditions = %v, want Ready, not Degraded, not Progressing", cond)
	}
	dep, _ := Deployments{Client: e.c.Dynamic}.Get(ctx, "osd-test", DefaultName)
	if dep.Status.ObservedGeneration != 1 || dep.Status.Children["api"].Revision != 1 || dep.Status.Children["api"].Version != "0.2.0" {
		t.Fatalf("stored status = %+v, want generation 1 and api revision 1 chart 0.2.0", dep.Status)
	}

	// Converged: re-running performs no Helm action; revisions stay 1.
	for i := 0; i < 3; i++ {
		res, err = e.c.Reconcile(ctx)
		if err != nil || !res.Ready || len(res.Actions) != 0 {
			t.Fatalf("Reconcile() converged = ready %v actions %q err %v, want ready and none", res.Ready, actionsOf(res), err)
		}
	}
	for _, rel := range []string{"db", "cache", "api"} {
		if r := e.revision(t, rel); r != 1 {
			t.Fatalf("release %s revision = %d after no-op reconciles, want 1", rel, r)
		}
	}

	// A changed override upgrades exactly that release.
	dep.Spec.Services = map[string]ServiceSpec{"api": {Overrides: map[string]any{"debug": true}}}
	if _, err := (Deployments{Client: e.c.Dynamic}).Update(ctx, dep); err != nil {
		t.Fatal(err)
	}
	res, _ = e.c.Reconcile(ctx)
	if got := actionsOf(res); got != "upgrade api" || e.revision(t, "api") != 2 || e.revision(t, "db") != 1 {
		t.Fatalf("Reconcile() after override = %q (api rev %d), want upgrade api to revision 2", got, e.revision(t, "api"))
	}
	rel, _ := e.configs["osd-test"].Releases.Last("api")
	if !strings.Contains(rel.Manifest, `debug: "true"`) {
		t.Fatalf("api manifest = %q, want debug true", rel.Manifest)
	}
	vals, err := e.c.RenderedValues(dep.Spec, "api")
	if err != nil || vals["debug"] != true {
		t.Fatalf("RenderedValues(api) = %v, %v, want debug true", vals, err)
	}
	res, _ = e.c.Reconcile(ctx)
	if len(res.Actions) != 0 || !res.Ready {
		t.Fatalf("Reconcile() after upgrade = %q ready %v, want no action, ready", actionsOf(res), res.Ready)
	}
}

func TestControllerReportsFailures(t *testing.T) {
	ctx := context.Background()
	// No image for db: db fails with a clear message and api waits for it.
	e := newCtrlEnv(t, DeploymentSpec{})
	res, err := e.c.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st := res.Status.Children["db"]; st.State != StateFailed || !strings.Contains(st.Message, `image "db" for db is not set`) {
		t.Fatalf("children[db] = %+v, want failed on the missing image", st)
	}
	if got := actionsOf(res); got != "install cache" {
		t.Fatalf("actions = %q, want install cache only", got)
	}
	var degraded metav1.Condition
	for _, c := range res.Status.Conditions {
		if c.Type == ConditionDegraded {
			degraded = c
		}
	}
	if degraded.Status != metav1.ConditionTrue || !strings.Contains(degraded.Message, "db: values:") {
		t.Fatalf("Degraded = %+v, want true naming db", degraded)
	}

	// A failed Job in a release: the release is failed with the step's last log line.
	e = newCtrlEnv(t, DeploymentSpec{Images: map[string]string{"db": "localhost/db:1"}})
	if _, err := e.c.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "db-init-1", Namespace: "osd-test", Annotations: helmAnno("db")},
		Spec:   batchv1.JobSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"job": "db-init"}}},
		Status: batchv1.JobStatus{Failed: 7, Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-init-1-abc", Namespace: "osd-test", Labels: map[string]string{"job": "db-init"}},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "sync",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}}}}
	if _, err := e.kube.BatchV1().Jobs("osd-test").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.CoreV1().Pods("osd-test").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	res, _ = e.c.Reconcile(ctx)
	st := res.Status.Children["db"]
	// client-go's fake returns "fake logs" as every container's log.
	if st.State != StateFailed || !strings.Contains(st.Message, "Job/db-init-1: job failed (BackoffLimitExceeded): pod db-init-1-abc: container sync failed (exit code 1): fake logs") {
		t.Fatalf("children[db] = %+v, want failed with the job's reason and log line", st)
	}
	if h := res.Status.Health["Job/osd-test/db-init-1"]; !h.Failed || h.Ready != 0 || h.Desired != 1 {
		t.Fatalf("health[job] = %+v, want failed 0/1", h)
	}
	// Same values: no retry by itself.
	if res, _ = e.c.Reconcile(ctx); len(res.Actions) != 0 {
		t.Fatalf("Reconcile() with a failed job = %q, want no action", actionsOf(res))
	}
	// RetryFailed deletes the failed Job and the next pass re-applies db (once).
	deleted, err := e.c.RetryFailed(ctx)
	if err != nil || strings.Join(deleted, ",") != "osd-test/db-init-1" {
		t.Fatalf("RetryFailed() = %v, %v, want osd-test/db-init-1", deleted, err)
	}
	if _, err := e.kube.BatchV1().Jobs("osd-test").Get(ctx, "db-init-1", metav1.GetOptions{}); err == nil {
		t.Fatalf("RetryFailed() left the failed job")
	}
	if res, _ = e.c.Reconcile(ctx); actionsOf(res) != "upgrade db" || e.revision(t, "db") != 2 {
		t.Fatalf("Reconcile() after RetryFailed = %q (rev %d), want upgrade db to revision 2", actionsOf(res), e.revision(t, "db"))
	}
	if res, _ = e.c.Reconcile(ctx); len(res.Actions) != 0 {
		t.Fatalf("Reconcile() after the retry = %q, want no action", actionsOf(res))
	}
}

func TestControllerRetriesInterruptedRelease(t *testing.T) {
	ctx := context.Background()
	e := newCtrlEnv(t, DeploymentSpec{Images: map[string]string{"db": "localhost/db:1"}})
	if _, err := e.c.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	// The daemon was killed during the install: Helm's record is left pending-install.
	rel, _ := e.configs["osd-test"].Releases.Last("db")
	rel.Info.Status = "pending-install"
	if err := e.configs["osd-test"].Releases.Update(rel); err != nil {
		t.Fatal(err)
	}
	res, err := e.c.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := actionsOf(res); got != "upgrade db" || e.revision(t, "db") != 2 {
		t.Fatalf("Reconcile() after interrupted install = %q (rev %d), want upgrade db to revision 2", got, e.revision(t, "db"))
	}
	e.workload(t, "db", true)
	e.workload(t, "cache", true)
	res, _ = e.c.Reconcile(ctx)
	if got := actionsOf(res); got != "install api" {
		t.Fatalf("Reconcile() = %q, want install api", got)
	}
}

func TestControllerNoDeployment(t *testing.T) {
	e := newCtrlEnv(t, DeploymentSpec{})
	e.c.Name = "absent"
	if _, err := e.c.Reconcile(context.Background()); err == nil || !strings.Contains(err.Error(), ErrNoDeployment.Error()) {
		t.Fatalf("Reconcile(absent) error = %v, want ErrNoDeployment", err)
	}
}

// brokenCharts has a chart that fails to render.
var brokenCharts = fstest.MapFS{
	"db/Chart.yaml":            {Data: []byte("apiVersion: v2\nname: db\nversion: 0.1.0\n")},
	"db/templates/broken.yaml": {Data: []byte("{{ fail \"boom\" }}\n")},
	"cache/Chart.yaml":         {Data: []byte("apiVersion: v2\nname: cache\nversion: 0.1.0\n")},
	"cache/templates/e.yaml":   {Data: []byte("# nothing\n")},
	"api/Chart.yaml":           {Data: []byte("apiVersion: v2\nname: api\nversion: 0.1.0\n")},
	"api/templates/e.yaml":     {Data: []byte("# nothing\n")},
}

func TestControllerBacksOffFailingHelmAction(t *testing.T) {
	ctx := context.Background()
	e := newCtrlEnv(t, DeploymentSpec{Images: map[string]string{"db": "x"}})
	e.c.Charts = brokenCharts
	clock := time.Unix(1e9, 0)
	e.c.now = func() time.Time { return clock }
	counter := &countingReleases{Releases: e.c.Helm, calls: map[string]int{}}
	e.c.Helm = counter
	attempts := func() int { return counter.calls["db"] }
	res, _ := e.c.Reconcile(ctx)
	st := res.Status.Children["db"]
	if st.State != StateFailed || !strings.Contains(st.Message, "helm install db") || !strings.Contains(st.Message, "boom") {
		t.Fatalf("children[db] = %+v, want failed helm install", st)
	}
	first := attempts()
	for i := 0; i < 3; i++ {
		res, _ = e.c.Reconcile(ctx)
	}
	if attempts() != first || !strings.Contains(res.Status.Children["db"].Message, "retry in 10s") {
		t.Fatalf("attempts = %d (was %d), message %q: want no new attempt within the backoff", attempts(), first, res.Status.Children["db"].Message)
	}
	clock = clock.Add(11 * time.Second)
	if _, err := e.c.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if attempts() != first+1 {
		t.Fatalf("attempts after the backoff = %d, want %d", attempts(), first+1)
	}
	if b := e.c.failed["db"]; b.next.Sub(clock) != 20*time.Second {
		t.Fatalf("next backoff = %s, want 20s", b.next.Sub(clock))
	}
}

type countingReleases struct {
	Releases
	calls map[string]int
}

func (c *countingReleases) Apply(ctx context.Context, ch *chart.Chart, ns, name string, values map[string]any) (helmclient.Release, error) {
	c.calls[name]++
	return c.Releases.Apply(ctx, ch, ns, name, values)
}

// sameSpec: a spec equals itself after the JSON round trip the stored object takes; any
// change (an image, a service's values) is a difference.
func TestSameSpec(t *testing.T) {
	base := DeploymentSpec{Profile: "single-node", Features: Features{Storage: StorageCeph},
		Common: map[string]any{"replicas": 1}, Images: map[string]string{"openstack": "localhost/osd/openstack:a"},
		Services: map[string]ServiceSpec{"heat": {Overrides: map[string]any{"onDemand": false}}}}
	raw, err := json.Marshal(base)
	if err != nil {
		t.Fatal(err)
	}
	var stored DeploymentSpec
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatal(err)
	}
	image := stored
	image.Images = map[string]string{"openstack": "localhost/osd/openstack:b"}
	values := stored
	values.Services = map[string]ServiceSpec{"heat": {Overrides: map[string]any{"onDemand": true}}}
	for _, tc := range []struct {
		name string
		a, b DeploymentSpec
		want bool
	}{
		{"itself", base, base, true},
		{"as stored", base, stored, true},
		{"another image", base, image, false},
		{"other values", base, values, false},
		{"empty", DeploymentSpec{}, base, false},
	} {
		if got := sameSpec(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: sameSpec = %v, want %v", tc.name, got, tc.want)
		}
	}
}
