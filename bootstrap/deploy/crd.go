package deploy

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
)

//go:embed crd.yaml
var crdYAML []byte

// CRDManifest returns the OpenStackDeployment CustomResourceDefinition.
func CRDManifest() (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(crdYAML, crd); err != nil {
		return nil, fmt.Errorf("parse crd manifest: %w", err)
	}
	return crd, nil
}

// EnsureCRD creates or updates the OpenStackDeployment CRD and waits until it is Established.
func EnsureCRD(ctx context.Context, client apiextensions.Interface) error {
	want, err := CRDManifest()
	if err != nil {
		return err
	}
	crds := client.ApiextensionsV1().CustomResourceDefinitions()
	have, err := crds.Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := crds.Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create crd %s: %w", want.Name, err)
		}
	case err != nil:
		return fmt.Errorf("get crd %s: %w", want.Name, err)
	default:
		have.Spec = want.Spec
		if _, err := crds.Update(ctx, have, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update crd %s: %w", want.Name, err)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		c, err := crds.Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range c.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("crd %s not established: %w", want.Name, err)
	}
	return nil
}
