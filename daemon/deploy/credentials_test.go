package deploy

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"
)

func TestAdminCredentials(t *testing.T) {
	ctx := context.Background()
	client := fake.NewSimpleClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "keystone-admin", Namespace: Namespace},
		Data: map[string][]byte{"password": []byte("s3cr'et")}})
	c, err := ReadAdminCredentials(ctx, client, Namespace, "http://10.0.0.5:30500/v3")
	if err != nil || c.Password != "s3cr'et" || c.Region != "RegionOne" {
		t.Fatalf("ReadAdminCredentials() = %+v, %v", c, err)
	}
	if _, err := ReadAdminCredentials(ctx, fake.NewSimpleClientset(), Namespace, ""); err == nil {
		t.Fatalf("ReadAdminCredentials(no secret) error = nil, want error")
	}
	b, err := c.CloudsYAML("osd")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Clouds map[string]struct {
			Auth map[string]string `json:"auth"`
			API  int               `json:"identity_api_version"`
		} `json:"clouds"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("CloudsYAML() does not parse: %v\n%s", err, b)
	}
	auth := doc.Clouds["osd"].Auth
	if auth["auth_url"] != "http://10.0.0.5:30500/v3" || auth["password"] != "s3cr'et" || auth["username"] != "admin" || doc.Clouds["osd"].API != 3 {
		t.Fatalf("CloudsYAML() = %s", b)
	}
	rc := c.OpenRC()
	if !strings.Contains(rc, `export OS_PASSWORD='s3cr'\''et'`) || !strings.Contains(rc, "export OS_AUTH_URL='http://10.0.0.5:30500/v3'") {
		t.Fatalf("OpenRC() = %s", rc)
	}
}
