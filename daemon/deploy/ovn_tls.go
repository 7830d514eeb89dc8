package deploy

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/osdcloud/osd/netsetup/ovnpki"
)

// OVN's TLS material, which the controller generates before any release (package ovnpki):
// a CA of its own, so that a key taken from a pod or a hypervisor authenticates to OVN's
// databases and to nothing else (not to osd's API, which trusts the cluster CA).
const (
	// OVNCASecret holds the CA (ca.crt, ca.key). No pod mounts it: osd alone signs.
	OVNCASecret = "ovn-ca"
	// OVNCentralSecret is the databases' server certificate (tls.crt, tls.key, ca.crt).
	OVNCentralSecret = "ovn-central-tls"
	// OVNNeutronSecret is neutron-server's client certificate: it writes the northbound
	// database and reads and writes the southbound one through its unrestricted port.
	OVNNeutronSecret = "ovn-neutron-tls"
	// OVNOsdSecret is osd's own client certificate (it lists and deletes chassis).
	OVNOsdSecret = "ovn-osd-tls"
)

// OVN database addresses the server certificate names: the ovn chart's fixed ClusterIPs
// (charts/ovn values clusterIPs) and the Services' names.
var ovnServerIPs = []net.IP{net.ParseIP("10.43.0.41"), net.ParseIP("10.43.0.42")}

// OVNServerNames are the DNS names of the NB and SB Services in namespace ns.
func OVNServerNames(ns string) []string {
	var out []string
	for _, svc := range []string{"ovn-nb", "ovn-sb"} {
		out = append(out, svc, svc+"."+ns, svc+"."+ns+".svc", svc+"."+ns+".svc.cluster.local")
	}
	return out
}

type ovnLeaf struct {
	secret, cn string
	server     bool
}

var ovnLeaves = []ovnLeaf{
	{OVNCentralSecret, "ovn-central", true},
	{OVNNeutronSecret, "neutron-server", false},
	{OVNOsdSecret, "osd", false},
}

// EnsureOVNSecrets creates the OVN CA when it is missing and (re)issues every leaf Secret
// that is missing, not signed by the CA, or due (ovnpki.Due). A CA Secret that cannot be
// read is an error, not replaced: every chassis holds certificates from it.
func EnsureOVNSecrets(ctx context.Context, client kubernetes.Interface, ns string, now time.Time) error {
	ca, err := ensureOVNCA(ctx, client, ns, now)
	if err != nil {
		return err
	}
	for _, l := range ovnLeaves {
		s, err := client.CoreV1().Secrets(ns).Get(ctx, l.secret, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("get secret %s/%s: %w", ns, l.secret, err)
		}
		var names []string
		var ips []net.IP
		if l.server {
			names, ips = OVNServerNames(ns), ovnServerIPs
		}
		if err == nil && bytes.Equal(s.Data["ca.crt"], ca.CertPEM) && !ovnpki.Due(ca, s.Data["tls.crt"], l.cn, names, ips, now) {
			continue
		}
		var p ovnpki.Pair
		if l.server {
			p, err = ca.IssueServer(l.cn, names, ips, now)
		} else {
			p, err = ca.IssueClient(l.cn, now)
		}
		if err != nil {
			return fmt.Errorf("secret %s/%s: %w", ns, l.secret, err)
		}
		data := map[string][]byte{"tls.crt": p.CertPEM, "tls.key": p.KeyPEM, "ca.crt": ca.CertPEM}
		if err := putSecret(ctx, client, ns, l.secret, data); err != nil {
			return err
		}
	}
	return nil
}

func ensureOVNCA(ctx context.Context, client kubernetes.Interface, ns string, now time.Time) (*ovnpki.CA, error) {
	s, err := client.CoreV1().Secrets(ns).Get(ctx, OVNCASecret, metav1.GetOptions{})
	if err == nil {
		ca, err := ovnpki.ParseCA(s.Data["ca.crt"], s.Data["ca.key"])
		if err != nil {
			return nil, fmt.Errorf("secret %s/%s: %w (delete it to make a new CA: every OVN certificate is then reissued)", ns, OVNCASecret, err)
		}
		return ca, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("get secret %s/%s: %w", ns, OVNCASecret, err)
	}
	p, err := ovnpki.NewCA(now)
	if err != nil {
		return nil, err
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: OVNCASecret, Namespace: ns, Labels: map[string]string{ManagedByLabel: "osd"}},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"ca.crt": p.CertPEM, "ca.key": p.KeyPEM},
	}
	if _, err := client.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return LoadOVNCA(ctx, client, ns) // made meanwhile by another pass: use that one
		}
		return nil, fmt.Errorf("create secret %s/%s: %w", ns, OVNCASecret, err)
	}
	return ovnpki.ParseCA(p.CertPEM, p.KeyPEM)
}

// LoadOVNCA reads the OVN CA (to sign a chassis' certificate).
func LoadOVNCA(ctx context.Context, client kubernetes.Interface, ns string) (*ovnpki.CA, error) {
	s, err := client.CoreV1().Secrets(ns).Get(ctx, OVNCASecret, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get secret %s/%s: %w", ns, OVNCASecret, err)
	}
	ca, err := ovnpki.ParseCA(s.Data["ca.crt"], s.Data["ca.key"])
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", ns, OVNCASecret, err)
	}
	return ca, nil
}

// OVNClientTLS is the TLS configuration of osd's own connections to OVN's databases: its
// certificate (OVNOsdSecret), the server checked against the OVN CA for serverName.
func OVNClientTLS(ctx context.Context, client kubernetes.Interface, ns, serverName string) (*tls.Config, error) {
	s, err := client.CoreV1().Secrets(ns).Get(ctx, OVNOsdSecret, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get secret %s/%s: %w", ns, OVNOsdSecret, err)
	}
	cert, err := tls.X509KeyPair(s.Data["tls.crt"], s.Data["tls.key"])
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", ns, OVNOsdSecret, err)
	}
	ca, err := ovnpki.ParseCert(s.Data["ca.crt"])
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", ns, OVNOsdSecret, err)
	}
	return ovnpki.ClientTLS(ca, &cert, serverName), nil
}

// putSecret creates or replaces Secret name's data (osd-managed).
func putSecret(ctx context.Context, client kubernetes.Interface, ns, name string, data map[string][]byte) error {
	secrets := client.CoreV1().Secrets(ns)
	have, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{ManagedByLabel: "osd"}},
			Type:       corev1.SecretTypeOpaque,
			Data:       data,
		}
		if _, err := secrets.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create secret %s/%s: %w", ns, name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get secret %s/%s: %w", ns, name, err)
	}
	have.Data = data
	if _, err := secrets.Update(ctx, have, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update secret %s/%s: %w", ns, name, err)
	}
	return nil
}
