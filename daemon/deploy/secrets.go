package deploy

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// KeyFormat says how a secret key's value is generated.
type KeyFormat string

const (
	// FormatHex is 32 random bytes as 64 hex characters: safe in URLs, INI files and shells.
	FormatHex KeyFormat = "hex"
	// FormatFernet is a Fernet key as keystone-manage writes it: 32 random bytes,
	// URL-safe base64 with padding (44 characters).
	FormatFernet KeyFormat = "fernet"
	// FormatKey32 is 16 random bytes as exactly 32 hex characters, for keys whose length
	// is fixed (Heat's auth_encryption_key must be 16, 24 or 32 characters).
	FormatKey32 KeyFormat = "key32"
)

// SecretSpec is a Secret whose missing keys are generated.
type SecretSpec struct {
	Name   string
	Keys   map[string]KeyFormat // key -> format
	Labels map[string]string
}

// ManagedByLabel marks the Secrets osd generated.
const ManagedByLabel = "app.kubernetes.io/managed-by"

// DefaultSecrets are the generated Secrets of the first slice, in namespace Namespace.
// Charts refer to them by these names.
func DefaultSecrets() []SecretSpec {
	return append([]SecretSpec{
		{Name: "mariadb-root", Keys: map[string]KeyFormat{"password": FormatHex}},
		{Name: "rabbitmq-credentials", Keys: map[string]KeyFormat{"password": FormatHex, "erlang-cookie": FormatHex}},
		// One RabbitMQ user per service that uses RPC (the rabbitmq chart's users, each
		// with a vhost of its own); rabbitmq-credentials' password is the user all shared
		// before (no chart uses it now), its erlang-cookie the node's cookie.
		{Name: "nova-rabbitmq", Keys: map[string]KeyFormat{"password": FormatHex}},
		{Name: "neutron-rabbitmq", Keys: map[string]KeyFormat{"password": FormatHex}},
		{Name: "cinder-rabbitmq", Keys: map[string]KeyFormat{"password": FormatHex}},
		{Name: "heat-rabbitmq", Keys: map[string]KeyFormat{"password": FormatHex}},
		{Name: "keystone-db", Keys: map[string]KeyFormat{"password": FormatHex}},
		{Name: "keystone-admin", Keys: map[string]KeyFormat{"password": FormatHex}},
		// Keystone key repositories: "0" is the staged key, "1" the primary (keystone's layout).
		{Name: "keystone-fernet-keys", Keys: map[string]KeyFormat{"0": FormatFernet, "1": FormatFernet}},
		{Name: "keystone-credential-keys", Keys: map[string]KeyFormat{"0": FormatFernet, "1": FormatFernet}},
		// Glance and Placement: database users and Keystone service users. Every
		// <service>-keystone also holds memcache-secret-key, the key keystonemiddleware
		// encrypts and authenticates that service's token cache with (ENCRYPT).
		{Name: "glance-db", Keys: map[string]KeyFormat{"password": FormatHex}},
		{Name: "glance-keystone", Keys: map[string]KeyFormat{"password": FormatHex, "memcache-secret-key": FormatHex}},
		{Name: "placement-db", Keys: map[string]KeyFormat{"password": FormatHex}},
		{Name: "placement-keystone", Keys: map[string]KeyFormat{"password": FormatHex, "memcache-secret-key": FormatHex}},
		// The rest of the cloud: Neutron (ML2/OVN), Nova, Heat, Horizon.
		{Name: "neutron-db", Keys: map[string]KeyFormat{"password": FormatHex}},
		{Name: "neutron-keystone", Keys: map[string]KeyFormat{"password": FormatHex, "memcache-secret-key": FormatHex}},
		{Name: "nova-db", Keys: map[string]KeyFormat{"password": FormatHex}},
		{Name: "nova-keystone", Keys: map[string]KeyFormat{"password": FormatHex, "memcache-secret-key": FormatHex}},
		// Shared by nova-api's metadata service and neutron's OVN metadata agent.
		{Name: "metadata-proxy", Keys: map[string]KeyFormat{"shared-secret": FormatHex}},
		{Name: "heat-db", Keys: map[string]KeyFormat{"password": FormatHex}},
		{Name: "heat-keystone", Keys: map[string]KeyFormat{"password": FormatHex, "memcache-secret-key": FormatHex}},
		// heat_domain_admin (stack domain users) and the key Heat encrypts credentials with.
		{Name: "heat-domain", Keys: map[string]KeyFormat{"password": FormatHex, "auth-encryption-key": FormatKey32}},
		{Name: "horizon", Keys: map[string]KeyFormat{"secret-key": FormatHex}},
	}, storageSecrets()...)
}

// EnsureSecrets creates every Secret in specs that is missing and adds only the keys a
// Secret lacks. An existing key is never regenerated or changed. Values are never logged
// and never appear in returned errors.
func EnsureSecrets(ctx context.Context, client kubernetes.Interface, ns string, specs []SecretSpec) error {
	// One list of the Secrets osd made (every pass of the controller and every osd init
	// runs this): a Secret found there with all its keys needs nothing; any other is read
	// and made or completed one by one.
	complete := map[string]bool{}
	if list, err := client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: ManagedByLabel + "=osd"}); err == nil {
		for _, s := range list.Items {
			complete[s.Name] = true
			for _, spec := range specs {
				if spec.Name != s.Name {
					continue
				}
				for k := range spec.Keys {
					if _, ok := s.Data[k]; !ok {
						complete[s.Name] = false
					}
				}
			}
		}
	}
	for _, spec := range specs {
		if complete[spec.Name] {
			continue
		}
		if err := ensureSecret(ctx, client, ns, spec, rand.Reader); err != nil {
			return err
		}
	}
	return nil
}

func ensureSecret(ctx context.Context, client kubernetes.Interface, ns string, spec SecretSpec, rnd io.Reader) error {
	secrets := client.CoreV1().Secrets(ns)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		have, err := secrets.Get(ctx, spec.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			s := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Namespace: ns, Labels: map[string]string{ManagedByLabel: "osd"}},
				Type:       corev1.SecretTypeOpaque,
				Data:       map[string][]byte{},
			}
			for k, v := range spec.Labels {
				s.Labels[k] = v
			}
			if err := fillMissing(s.Data, spec.Keys, rnd); err != nil {
				return fmt.Errorf("secret %s/%s: %w", ns, spec.Name, err)
			}
			_, err = secrets.Create(ctx, s, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				// Someone created it meanwhile: retry as an update of what they wrote.
				return apierrors.NewConflict(corev1.Resource("secrets"), spec.Name, err)
			}
			if err != nil {
				return fmt.Errorf("create secret %s/%s: %w", ns, spec.Name, err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("get secret %s/%s: %w", ns, spec.Name, err)
		}
		if have.Data == nil {
			have.Data = map[string][]byte{}
		}
		missing := 0
		for k := range spec.Keys {
			if _, ok := have.Data[k]; !ok {
				missing++
			}
		}
		if missing == 0 {
			return nil
		}
		if err := fillMissing(have.Data, spec.Keys, rnd); err != nil {
			return fmt.Errorf("secret %s/%s: %w", ns, spec.Name, err)
		}
		if _, err := secrets.Update(ctx, have, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsConflict(err) {
				return err
			}
			return fmt.Errorf("update secret %s/%s: %w", ns, spec.Name, err)
		}
		return nil
	})
}

func fillMissing(data map[string][]byte, keys map[string]KeyFormat, rnd io.Reader) error {
	for k, f := range keys {
		if _, ok := data[k]; ok {
			continue
		}
		v, err := generate(f, rnd)
		if err != nil {
			return fmt.Errorf("generate key %q: %w", k, err)
		}
		data[k] = v
	}
	return nil
}

func generate(f KeyFormat, rnd io.Reader) ([]byte, error) {
	n := 32
	if f == FormatKey32 || f == FormatCephx || f == FormatUUID {
		n = 16
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(rnd, b); err != nil {
		return nil, fmt.Errorf("read random bytes: %w", err)
	}
	switch f {
	case FormatHex, FormatKey32:
		return []byte(hex.EncodeToString(b)), nil
	case FormatFernet:
		return []byte(base64.URLEncoding.EncodeToString(b)), nil
	case FormatCephx:
		return cephxKey(b, time.Now())
	case FormatUUID:
		return uuidV4(b)
	}
	return nil, fmt.Errorf("unknown format %q", f)
}
