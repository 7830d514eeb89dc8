package deploy

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
