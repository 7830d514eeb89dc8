package deploy

import (
	"bytes"
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/osdcloud/osd/netsetup/ovnpki"
)

// The fake clientset stands in for the API server (as in TestEnsureSecrets).
func TestEnsureOVNSecrets(t *testing.T) {
	ctx := context.Background()
	client := fake.NewSimpleClientset()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	get := func(name string) map[string][]byte {
		t.Helper()
		s, err := client.CoreV1().Secrets(Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("secret %s: %v", name, err)
		}
		return s.Data
	}
	if err := EnsureOVNSecrets(ctx, client, Namespace, now); err != nil {
		t.Fatal(err)
	}
	ca, err := LoadOVNCA(ctx, client, Namespace)
	if err != nil {
		t.Fatal(err)
	}
	first := map[string][]byte{}
	for _, l := range []struct {
		secret, cn string
		names      []string
	}{
		{OVNCentralSecret, "ovn-central", []string{"ovn-sb.openstack.svc.cluster.local", "10.43.0.41", "10.43.0.42"}},
		{OVNNeutronSecret, "neutron-server", nil},
		{OVNOsdSecret, "osd", nil},
	} {
		d := get(l.secret)
		if !bytes.Equal(d["ca.crt"], ca.CertPEM) || ovnpki.Due(ca, d["tls.crt"], l.cn, l.names, nil, now) {
			t.Errorf("secret %s: not a current certificate for %s %v from the OVN CA", l.secret, l.cn, l.names)
		}
		first[l.secret] = d["tls.crt"]
	}
	// Another pass changes nothing; one near the certificates' end reissues them from the same CA.
	if err := EnsureOVNSecrets(ctx, client, Namespace, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(get(OVNNeutronSecret)["tls.crt"], first[OVNNeutronSecret]) {
		t.Errorf("a second pass reissued %s", OVNNeutronSecret)
	}
	later := now.Add(ovnpki.LeafLifetime*2/3 + 2*time.Hour)
	if err := EnsureOVNSecrets(ctx, client, Namespace, later); err != nil {
		t.Fatal(err)
	}
	again, _ := LoadOVNCA(ctx, client, Namespace)
	if !bytes.Equal(again.CertPEM, ca.CertPEM) {
		t.Errorf("renewal replaced the CA")
	}
	if d := get(OVNNeutronSecret); bytes.Equal(d["tls.crt"], first[OVNNeutronSecret]) || ovnpki.Due(ca, d["tls.crt"], "neutron-server", nil, nil, later) {
		t.Errorf("%s was not renewed when due", OVNNeutronSecret)
	}
	if _, err := OVNClientTLS(ctx, client, Namespace, "ovn-sb.openstack.svc.cluster.local"); err != nil {
		t.Errorf("OVNClientTLS() = %v", err)
	}
	// A CA Secret that cannot be read is an error, never silently replaced.
	s, _ := client.CoreV1().Secrets(Namespace).Get(ctx, OVNCASecret, metav1.GetOptions{})
	s.Data["ca.key"] = []byte("junk")
	client.CoreV1().Secrets(Namespace).Update(ctx, s, metav1.UpdateOptions{})
	if err := EnsureOVNSecrets(ctx, client, Namespace, now); err == nil {
		t.Errorf("EnsureOVNSecrets() with a broken CA = nil error, want one")
	}
}
