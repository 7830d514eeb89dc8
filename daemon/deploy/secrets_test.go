package deploy

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"reflect"
	"regexp"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The fake clientset stands in for the API server here (the brief allows it for this unit);
// the same code against k3s is covered by the daemon's integration test.
func TestEnsureSecrets(t *testing.T) {
	ctx := context.Background()
	pre := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "rabbitmq-credentials", Namespace: Namespace},
		Data:       map[string][]byte{"password": []byte("chosen-by-user")},
	}
	client := fake.NewSimpleClientset(pre)
	specs := DefaultSecrets()
	if err := EnsureSecrets(ctx, client, Namespace, specs); err != nil {
		t.Fatalf("EnsureSecrets() error = %v", err)
	}
	hexRE := regexp.MustCompile(`^[0-9a-f]{64}$`)
	first := map[string]map[string][]byte{}
	seen := map[string]bool{}
	for _, spec := range specs {
		s, err := client.CoreV1().Secrets(Namespace).Get(ctx, spec.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("secret %s: %v", spec.Name, err)
		}
		first[spec.Name] = s.Data
		for k, f := range spec.Keys {
			v := s.Data[k]
			if spec.Name == "rabbitmq-credentials" && k == "password" {
				if string(v) != "chosen-by-user" {
					t.Errorf("EnsureSecrets() changed existing key %s/%s", spec.Name, k)
				}
				continue
			}
			switch f {
			case FormatHex:
				if !hexRE.Match(v) {
					t.Errorf("secret %s/%s has %d chars, want 64 hex", spec.Name, k, len(v))
				}
			case FormatFernet:
				raw, err := base64.URLEncoding.DecodeString(string(v))
				if err != nil || len(raw) != 32 || len(v) != 44 {
					t.Errorf("secret %s/%s is not a fernet key (len %d, err %v)", spec.Name, k, len(v), err)
				}
			case FormatKey32:
				if _, err := hex.DecodeString(string(v)); err != nil || len(v) != 32 {
					t.Errorf("secret %s/%s has %d chars (err %v), want 32 hex", spec.Name, k, len(v), err)
				}
			case FormatCephx:
				if err := checkCephxKey(v); err != nil {
					t.Errorf("secret %s/%s: %v", spec.Name, k, err)
				}
			case FormatUUID:
				if !uuidRE.Match(v) {
					t.Errorf("secret %s/%s = %q, want a version 4 UUID", spec.Name, k, v)
				}
			default:
				t.Errorf("secret %s/%s has unchecked format %q", spec.Name, k, f)
			}
			if seen[string(v)] {
				t.Errorf("secret %s/%s repeats another generated value", spec.Name, k)
			}
			seen[string(v)] = true
		}
	}
	if got := first["rabbitmq-credentials"]["erlang-cookie"]; len(got) != 64 {
		t.Errorf("EnsureSecrets() did not add the missing erlang-cookie to an existing secret")
	}

	// Re-run with nothing missing: one list of osd's Secrets, and a read of the one the
	// user made (not labelled as osd's), nothing written.
	client.ClearActions()
	if err := EnsureSecrets(ctx, client, Namespace, specs); err != nil {
		t.Fatalf("EnsureSecrets() no-op run error = %v", err)
	}
	var verbs []string
	for _, a := range client.Actions() {
		v := a.GetVerb()
		if g, ok := a.(k8stesting.GetAction); ok {
			v += " " + g.GetName()
		}
		verbs = append(verbs, v)
	}
	if !reflect.DeepEqual(verbs, []string{"list", "get rabbitmq-credentials"}) {
		t.Errorf("EnsureSecrets() with every Secret complete made requests %q, want a list and a get of rabbitmq-credentials", verbs)
	}

	// Re-run: nothing changes. Add a key to the spec: only it is generated.
	specs[0].Keys["extra"] = FormatHex
	if err := EnsureSecrets(ctx, client, Namespace, specs); err != nil {
		t.Fatalf("EnsureSecrets() second run error = %v", err)
	}
	for _, spec := range specs {
		s, _ := client.CoreV1().Secrets(Namespace).Get(ctx, spec.Name, metav1.GetOptions{})
		for k, v := range first[spec.Name] {
			if !bytes.Equal(s.Data[k], v) {
				t.Errorf("EnsureSecrets() regenerated %s/%s", spec.Name, k)
			}
		}
	}
	s, _ := client.CoreV1().Secrets(Namespace).Get(ctx, specs[0].Name, metav1.GetOptions{})
	if len(s.Data["extra"]) != 64 {
		t.Errorf("EnsureSecrets() did not add new key extra to %s", specs[0].Name)
	}
	if s.Labels[ManagedByLabel] != "osd" {
		t.Errorf("secret %s label %s = %q, want osd", s.Name, ManagedByLabel, s.Labels[ManagedByLabel])
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("no entropy") }

func TestEnsureSecretRandomFailure(t *testing.T) {
	client := fake.NewSimpleClientset()
	err := ensureSecret(context.Background(), client, Namespace, SecretSpec{Name: "x", Keys: map[string]KeyFormat{"k": FormatHex}}, failingReader{})
	if err == nil {
		t.Fatalf("ensureSecret(failing rand) error = nil, want error")
	}
	if _, err := client.CoreV1().Secrets(Namespace).Get(context.Background(), "x", metav1.GetOptions{}); err == nil {
		t.Fatalf("ensureSecret(failing rand) created a secret")
	}
}
