package deploy

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
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
	// The embedded manifest's hash and the generation of the spec written from it, kept in
	// an annotation: a CRD that has both and is established needs no update and no wait.
	// (The API server defaults fields of the spec, so the stored spec never equals the
	// manifest's; a change of the spec by anyone else bumps its generation.)
	sum := sha256.Sum256(crdYAML)
	hash := hex.EncodeToString(sum[:])
	written := func(c *apiextensionsv1.CustomResourceDefinition) string {
		return fmt.Sprintf("%s@%d", hash, c.Generation)
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
	case have.Annotations[crdHashAnnotation] == written(have) && established(have):
		return nil
	default:
		have.Spec = want.Spec
		if _, err := crds.Update(ctx, have, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update crd %s: %w", want.Name, err)
		}
	}
	var ready *apiextensionsv1.CustomResourceDefinition
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		c, err := crds.Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil || !established(c) {
			return false, nil
		}
		ready = c
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("crd %s not established: %w", want.Name, err)
	}
	if ready.Annotations[crdHashAnnotation] != written(ready) {
		// Metadata only: the generation stays. Should this fail, the next run writes the
		// spec again and retries.
		if ready.Annotations == nil {
			ready.Annotations = map[string]string{}
		}
		ready.Annotations[crdHashAnnotation] = written(ready)
		if _, err := crds.Update(ctx, ready, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("annotate crd %s: %w", want.Name, err)
		}
	}
	return nil
}

// crdHashAnnotation holds "SHA256@GENERATION": the hash of the manifest the CRD's spec was
// last written from, and the generation that write gave it.
const crdHashAnnotation = "osd.io/manifest-sha256"

func established(c *apiextensionsv1.CustomResourceDefinition) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
