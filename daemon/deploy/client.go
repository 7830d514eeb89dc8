package deploy

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// Deployments reads and writes OpenStackDeployment objects through the dynamic client.
type Deployments struct {
	Client dynamic.Interface
}

func (d Deployments) res(ns string) dynamic.ResourceInterface {
	return d.Client.Resource(GVR).Namespace(ns)
}

// Get returns the named deployment.
func (d Deployments) Get(ctx context.Context, ns, name string) (*OpenStackDeployment, error) {
	u, err := d.res(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get %s %s/%s: %w", Kind, ns, name, err)
	}
	return FromUnstructured(u)
}

// Create creates dep (its status is ignored by the API server).
func (d Deployments) Create(ctx context.Context, dep *OpenStackDeployment) (*OpenStackDeployment, error) {
	u, err := ToUnstructured(dep)
	if err != nil {
		return nil, err
	}
	out, err := d.res(dep.Namespace).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create %s %s/%s: %w", Kind, dep.Namespace, dep.Name, err)
	}
	return FromUnstructured(out)
}

// Update writes dep's metadata and spec (optimistic concurrency on resourceVersion).
func (d Deployments) Update(ctx context.Context, dep *OpenStackDeployment) (*OpenStackDeployment, error) {
	u, err := ToUnstructured(dep)
	if err != nil {
		return nil, err
	}
	out, err := d.res(dep.Namespace).Update(ctx, u, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("update %s %s/%s: %w", Kind, dep.Namespace, dep.Name, err)
	}
	return FromUnstructured(out)
}

// UpdateStatus writes dep's status subresource.
func (d Deployments) UpdateStatus(ctx context.Context, dep *OpenStackDeployment) (*OpenStackDeployment, error) {
	u, err := ToUnstructured(dep)
	if err != nil {
		return nil, err
	}
	out, err := d.res(dep.Namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("update status of %s %s/%s: %w", Kind, dep.Namespace, dep.Name, err)
	}
	return FromUnstructured(out)
}

// ToUnstructured converts dep (setting apiVersion and kind).
func ToUnstructured(dep *OpenStackDeployment) (*unstructured.Unstructured, error) {
	c := *dep
	c.APIVersion = Group + "/" + Version
	c.Kind = Kind
	b, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", Kind, err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return nil, fmt.Errorf("encode %s: %w", Kind, err)
	}
	return u, nil
}

// FromUnstructured converts u.
func FromUnstructured(u *unstructured.Unstructured) (*OpenStackDeployment, error) {
	b, err := u.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", Kind, err)
	}
	dep := &OpenStackDeployment{}
	if err := json.Unmarshal(b, dep); err != nil {
		return nil, fmt.Errorf("decode %s: %w", Kind, err)
	}
	return dep, nil
}
