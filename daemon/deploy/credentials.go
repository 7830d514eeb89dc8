package deploy

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// Keystone's externally reachable port (Service keystone-api, chart value service.nodePort).
const KeystoneNodePort = 30500

// AdminCredentials are what clouds.yaml and an openrc need for the admin user that the
// Keystone bootstrap step creates.
type AdminCredentials struct {
	AuthURL  string // e.g. http://127.0.0.1:30500/v3
	Password string
	Region   string
}

// ReadAdminCredentials reads the admin password from Secret keystone-admin in ns.
// The result holds a secret: never log it.
func ReadAdminCredentials(ctx context.Context, client kubernetes.Interface, ns, authURL string) (AdminCredentials, error) {
	s, err := client.CoreV1().Secrets(ns).Get(ctx, "keystone-admin", metav1.GetOptions{})
	if err != nil {
		return AdminCredentials{}, fmt.Errorf("read keystone admin secret: %w", err)
	}
	pw := string(s.Data["password"])
	if pw == "" {
		return AdminCredentials{}, fmt.Errorf("keystone admin secret %s/keystone-admin has no password", ns)
	}
	return AdminCredentials{AuthURL: authURL, Password: pw, Region: "RegionOne"}, nil
}

// CloudsYAML renders a clouds.yaml with one cloud, cloud (use with OS_CLOUD=<cloud>).
// Write it 0600.
func (c AdminCredentials) CloudsYAML(cloud string) ([]byte, error) {
	doc := map[string]any{"clouds": map[string]any{cloud: map[string]any{
		"auth": map[string]any{
			"auth_url": c.AuthURL, "username": "admin", "password": c.Password, "project_name": "admin",
			"user_domain_name": "Default", "project_domain_name": "Default",
		},
		"region_name": c.Region, "interface": "public", "identity_api_version": 3,
	}}}
	b, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("render clouds.yaml: %w", err)
	}
	return b, nil
}

// OpenRC renders a shell file exporting the admin credentials. Write it 0600.
func (c AdminCredentials) OpenRC() string {
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	var b strings.Builder
	for _, kv := range [][2]string{
		{"OS_AUTH_URL", c.AuthURL}, {"OS_USERNAME", "admin"}, {"OS_PASSWORD", c.Password},
		{"OS_PROJECT_NAME", "admin"}, {"OS_USER_DOMAIN_NAME", "Default"}, {"OS_PROJECT_DOMAIN_NAME", "Default"},
		{"OS_REGION_NAME", c.Region}, {"OS_IDENTITY_API_VERSION", "3"}, {"OS_INTERFACE", "public"},
	} {
		fmt.Fprintf(&b, "export %s=%s\n", kv[0], q(kv[1]))
	}
	return b.String()
}
