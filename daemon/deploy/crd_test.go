package deploy

import (
	"context"
	"reflect"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

func TestCRDManifest(t *testing.T) {
	crd, err := CRDManifest()
	if err != nil {
		t.Fatalf("CRDManifest() error = %v", err)
	}
	if crd.Name != Resource+"."+Group || crd.Spec.Group != Group || crd.Spec.Names.Kind != Kind {
		t.Fatalf("CRDManifest() = %s %s %s, want %s.%s %s", crd.Name, crd.Spec.Group, crd.Spec.Names.Kind, Resource, Group, Kind)
	}
	v := crd.Spec.Versions[0]
	if v.Name != Version || v.Subresources == nil || v.Subresources.Status == nil {
		t.Fatalf("CRDManifest() version %s has no status subresource", v.Name)
	}
	spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
	if p := spec.Properties["common"].XPreserveUnknownFields; p == nil || !*p {
		t.Fatalf("CRDManifest() spec.common does not preserve unknown fields")
	}
	// Every JSON field of the Go status must be in the schema, or the API server prunes it.
	status := v.Schema.OpenAPIV3Schema.Properties["status"]
	for _, f := range []string{"chart", "version", "revision", "valuesHash", "state", "message"} {
		if _, ok := status.Properties["children"].AdditionalProperties.Schema.Properties[f]; !ok {
			t.Errorf("CRDManifest() status.children has no %q", f)
		}
	}
	for _, f := range []string{"kind", "namespace", "name", "release", "ready", "desired", "reason", "failed"} {
		if _, ok := status.Properties["health"].AdditionalProperties.Schema.Properties[f]; !ok {
			t.Errorf("CRDManifest() status.health has no %q", f)
		}
	}
}

func TestUnstructuredRoundTrip(t *testing.T) {
	on := true
	dep := &OpenStackDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: DefaultName, Namespace: Namespace},
		Spec: DeploymentSpec{Profile: ProfileSingleNode, Features: Features{Storage: "lvm", Network: "ovn"},
			Common:   map[string]any{"debug": true, "n": map[string]any{"x": "y"}},
			Services: map[string]ServiceSpec{"glance": {Enabled: &on, Overrides: map[string]any{"a": "b"}}},
			Images:   map[string]string{"openstack": "osd/openstack:1"}},
		Status: DeploymentStatus{Children: map[string]ChildStatus{"keystone": {Chart: "keystone", Revision: 2, State: StateReady}},
			Health: map[string]WorkloadHealth{"Deployment/openstack/keystone-api": {Kind: "Deployment", Name: "keystone-api", Ready: 1, Desired: 1}}},
	}
	u, err := ToUnstructured(dep)
	if err != nil {
		t.Fatal(err)
	}
	if u.GetAPIVersion() != Group+"/"+Version || u.GetKind() != Kind {
		t.Fatalf("ToUnstructured() apiVersion/kind = %s %s", u.GetAPIVersion(), u.GetKind())
	}
	back, err := FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	back.TypeMeta = dep.TypeMeta
	if !reflect.DeepEqual(back, dep) {
		t.Fatalf("FromUnstructured(ToUnstructured(d)) = %+v, want %+v", back, dep)
	}
}

// TestEnsureCRD uses the apiextensions fake clientset (no API server runs in go test); a
// reactor plays the API server's part of marking the CRD Established.
func TestEnsureCRD(t *testing.T) {
	ctx := context.Background()
	client := apiextfake.NewSimpleClientset()
	client.PrependReactor("create", "customresourcedefinitions", func(a k8stesting.Action) (bool, runtime.Object, error) {
		crd := a.(k8stesting.CreateAction).GetObject().(*apiextensionsv1.CustomResourceDefinition)
		crd.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}}
		return false, nil, nil
	})
	if err := EnsureCRD(ctx, client); err != nil {
		t.Fatalf("EnsureCRD() error = %v", err)
	}
	// Second call updates the existing CRD to the embedded spec.
	crd, _ := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, Resource+"."+Group, metav1.GetOptions{})
	crd.Spec.Names.ShortNames = []string{"changed"}
	crd.Generation++ // as the API server does on a change of the spec
	if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := EnsureCRD(ctx, client); err != nil {
		t.Fatalf("EnsureCRD() again error = %v", err)
	}
	crd, _ = client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, Resource+"."+Group, metav1.GetOptions{})
	if !reflect.DeepEqual(crd.Spec.Names.ShortNames, []string{"osdep"}) {
		t.Fatalf("EnsureCRD() left short names %v, want [osdep]", crd.Spec.Names.ShortNames)
	}
	// The CRD written from this manifest and established: one read, nothing written.
	client.ClearActions()
	if err := EnsureCRD(ctx, client); err != nil {
		t.Fatalf("EnsureCRD() on an up-to-date CRD error = %v", err)
	}
	if acts := client.Actions(); len(acts) != 1 || acts[0].GetVerb() != "get" {
		t.Errorf("EnsureCRD() on an up-to-date CRD made %d requests (%v), want one get", len(acts), acts)
	}
	// Not established (yet): it waits, and does not return before.
	crd.Status.Conditions = nil
	if _, err := client.ApiextensionsV1().CustomResourceDefinitions().UpdateStatus(ctx, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if err := EnsureCRD(short, client); err == nil {
		t.Errorf("EnsureCRD() on a CRD that is not established returned nil, want it to wait (and time out here)")
	}
}
