package deployment

import (
	"encoding/json"
	"errors"
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/osdcloud/osd/charts"
	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/deploy"
)

// TestWireStatus: the API's deployment status has the controller's status's shape, field
// for field (a field added on one side and not the other fails here).
func TestWireStatus(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	st := deploy.DeploymentStatus{
		ObservedGeneration: 3,
		Children:           map[string]deploy.ChildStatus{"keystone": {Chart: "keystone", Version: "0.1.0", Revision: 2, ValuesHash: "h", State: deploy.StateFailed, Message: "m"}},
		Health: map[string]deploy.WorkloadHealth{"Deployment/openstack/keystone-api": {Kind: "Deployment", Namespace: "openstack", Name: "keystone-api",
			Release: "keystone", Ready: 0, Desired: 1, Reason: "CrashLoopBackOff", Failed: true}},
		Conditions: []metav1.Condition{{Type: deploy.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: 3, LastTransitionTime: at, Reason: "R", Message: "M"}},
	}
	got, err := WireStatus(st)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(st)
	b, _ := json.Marshal(got)
	var x, y any
	json.Unmarshal(a, &x)
	json.Unmarshal(b, &y)
	if !reflect.DeepEqual(x, y) {
		t.Errorf("WireStatus changes the answer:\ncontroller %s\napi        %s", a, b)
	}
	if got.Children["keystone"].State != api.ReleaseFailed {
		t.Errorf("release state = %q, want %q", got.Children["keystone"].State, api.ReleaseFailed)
	}
}

// TestCatalogPortsMatchCharts: every NodePort the catalog decides sits at its values path
// in the chart, whose default agrees (so a chart rendered alone serves the same port).
func TestCatalogPortsMatchCharts(t *testing.T) {
	seen := map[int]string{}
	for _, svc := range deploy.DefaultCatalog().Services {
		if len(svc.Ports) == 0 {
			continue
		}
		b, err := fs.ReadFile(charts.FS, svc.Chart+"/values.yaml")
		if err != nil {
			t.Fatal(err)
		}
		var vals map[string]any
		if err := yaml.Unmarshal(b, &vals); err != nil {
			t.Fatal(err)
		}
		for _, p := range svc.Ports {
			if other, dup := seen[p.NodePort]; dup {
				t.Errorf("NodePort %d of %s/%s is also %s's", p.NodePort, svc.Name, p.Name, other)
			}
			seen[p.NodePort] = svc.Name + "/" + p.Name
			var v any = vals
			for _, k := range strings.Split(p.Values, ".") {
				m, _ := v.(map[string]any)
				v = m[k]
			}
			if n, ok := v.(float64); !ok || int(n) != p.NodePort {
				t.Errorf("%s values %s = %v, want the catalog's NodePort %d", svc.Chart, p.Values, v, p.NodePort)
			}
		}
	}
	if len(seen) < 8 {
		t.Errorf("catalog NodePorts = %d, want every public endpoint's", len(seen))
	}
}

func TestSetNodePorts(t *testing.T) {
	cat := deploy.Catalog{Services: []deploy.Service{
		{Name: "heat", Ports: []deploy.Port{{Name: "public", NodePort: 30004, Values: "service.nodePorts.api"}, {Name: "cfn", NodePort: 30000, Values: "service.nodePorts.cfn"}}},
		{Name: "glance", Ports: []deploy.Port{{Name: "public", NodePort: 30292, Values: "service.nodePort"}}},
		{Name: "mariadb"},
	}}
	services := map[string]deploy.ServiceSpec{"glance": {Overrides: map[string]any{"service": map[string]any{"type": "NodePort"}, "other": 1}}}
	SetNodePorts(services, cat)
	want := map[string]deploy.ServiceSpec{
		"glance": {Overrides: map[string]any{"service": map[string]any{"type": "NodePort", "nodePort": 30292}, "other": 1}},
		"heat":   {Overrides: map[string]any{"service": map[string]any{"nodePorts": map[string]any{"api": 30004, "cfn": 30000}}}},
	}
	if !reflect.DeepEqual(services, want) {
		t.Errorf("SetNodePorts() = %v, want %v", services, want)
	}
}

// TestProgressItems: one item a release, sorted, with the reason of those not Ready, and
// the last pass's error last; messages stay on their item's line.
func TestProgressItems(t *testing.T) {
	var r deploy.Result
	r.Status.Children = map[string]deploy.ChildStatus{
		"nova":    {State: deploy.StateWaiting, Message: "waiting for placement"},
		"mariadb": {State: deploy.StateReady, Message: "ignored when Ready"},
		"ceph":    {State: deploy.StateWaiting, Message: "line one\nline two"},
	}
	got := ProgressItems(r, errors.New("apply: boom"))
	want := []string{"ceph waiting (line one line two)", "mariadb ready", "nova waiting (waiting for placement)", "last pass: apply: boom"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ProgressItems() = %q, want %q", got, want)
	}
	if p := Progress(r, nil); p != "ceph waiting (line one line two), mariadb ready, nova waiting (waiting for placement)" {
		t.Errorf("Progress() = %q", p)
	}
}
