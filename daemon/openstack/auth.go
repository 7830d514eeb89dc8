package openstack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/yaml"
)

// Credentials are a Keystone v3 password login.
type Credentials struct {
	AuthURL           string `json:"auth_url"` // e.g. http://10.0.0.1:30500/v3
	Username          string `json:"username"`
	Password          string `json:"password"`
	ProjectName       string `json:"project_name"`
	UserDomainName    string `json:"user_domain_name"`
	ProjectDomainName string `json:"project_domain_name"`
	Region            string `json:"region_name"` // default RegionOne
	Interface         string `json:"interface"`   // public (default), internal or admin
}

// LoadCloudsYAML reads cloud name from a clouds.yaml file (as osd writes it).
func LoadCloudsYAML(path, name string) (Credentials, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Credentials{}, err
	}
	var doc struct {
		Clouds map[string]struct {
			Auth      Credentials `json:"auth"`
			Region    string      `json:"region_name"`
			Interface string      `json:"interface"`
		} `json:"clouds"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return Credentials{}, fmt.Errorf("parse %s: %w", path, err)
	}
	c, ok := doc.Clouds[name]
	if !ok {
		return Credentials{}, fmt.Errorf("%s has no cloud %q", path, name)
	}
	cr := c.Auth
	cr.Region, cr.Interface = c.Region, c.Interface
	return cr, nil
}

func (c Credentials) withDefaults() Credentials {
	if c.UserDomainName == "" {
		c.UserDomainName = "Default"
	}
	if c.ProjectDomainName == "" {
		c.ProjectDomainName = "Default"
	}
	if c.Region == "" {
		c.Region = "RegionOne"
	}
	if c.Interface == "" {
		c.Interface = "public"
	}
	c.AuthURL = strings.TrimRight(c.AuthURL, "/")
	return c
}

// CatalogEntry is one service of the Keystone catalog.
type CatalogEntry struct {
	Type      string     `json:"type"`
	Name      string     `json:"name"`
	Endpoints []Endpoint `json:"endpoints"`
}

// Endpoint is one URL of a service.
type Endpoint struct {
	Interface string `json:"interface"`
	Region    string `json:"region"`
	RegionID  string `json:"region_id"`
	URL       string `json:"url"`
}

// FindEndpoint picks the URL of serviceType for an interface and region
// (an endpoint without a region matches any).
func FindEndpoint(catalog []CatalogEntry, serviceType, iface, region string) (string, error) {
	var ifaces []string
	for _, s := range catalog {
		if s.Type != serviceType {
			continue
		}
		for _, e := range s.Endpoints {
			ifaces = append(ifaces, e.Interface+"@"+e.Region)
			r := e.Region
			if r == "" {
				r = e.RegionID
			}
			if e.Interface == iface && (r == "" || region == "" || r == region) {
				return strings.TrimRight(e.URL, "/"), nil
			}
		}
		return "", fmt.Errorf("service %s has no %s endpoint in region %s (has %v)", serviceType, iface, region, ifaces)
	}
	return "", fmt.Errorf("no %s service in the catalog: %w", serviceType, ErrNoService)
}

// Client talks to one OpenStack cloud with a Keystone token it renews.
type Client struct {
	HTTP  *http.Client
	creds Credentials

	mu        sync.Mutex
	token     string
	expires   time.Time
	catalog   []CatalogEntry
	projectID string
	userID    string
}

// For says whether c logged in with creds.
func (c *Client) For(creds Credentials) bool { return c.creds == creds.withDefaults() }

// Authenticate logs in with creds and returns a client holding the token
// and the catalog.
func Authenticate(ctx context.Context, creds Credentials) (*Client, error) {
	c := &Client{HTTP: &http.Client{Timeout: 2 * time.Minute}, creds: creds.withDefaults()}
	if err := c.login(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// authRequest is the body of POST /v3/auth/tokens for a project-scoped
// password login.
func authRequest(c Credentials) map[string]any {
	return map[string]any{"auth": map[string]any{
		"identity": map[string]any{
			"methods": []string{"password"},
			"password": map[string]any{"user": map[string]any{
				"name": c.Username, "password": c.Password, "domain": map[string]any{"name": c.UserDomainName},
			}},
		},
		"scope": map[string]any{"project": map[string]any{
			"name": c.ProjectName, "domain": map[string]any{"name": c.ProjectDomainName},
		}},
	}}
}

func (c *Client) login(ctx context.Context) error {
	body, _ := json.Marshal(authRequest(c.creds))
	u := c.creds.AuthURL + "/auth/tokens"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("keystone login at %s: %w", c.creds.AuthURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return decodeError(http.MethodPost, u, resp)
	}
	var out struct {
		Token struct {
			ExpiresAt time.Time      `json:"expires_at"`
			Catalog   []CatalogEntry `json:"catalog"`
			Project   struct {
				ID string `json:"id"`
			} `json:"project"`
			User struct {
				ID string `json:"id"`
			} `json:"user"`
		} `json:"token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("keystone login: decode token: %w", err)
	}
	tok := resp.Header.Get("X-Subject-Token")
	if tok == "" {
		return fmt.Errorf("keystone login: no X-Subject-Token in the answer")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.token, c.expires, c.catalog = tok, out.Token.ExpiresAt, out.Token.Catalog
	c.projectID, c.userID = out.Token.Project.ID, out.Token.User.ID
	return nil
}

// Check asks Keystone to validate the client's own token (GET /auth/tokens): it proves
// Keystone answers and honours the login without another password check. A token
// Keystone refuses, or one about to expire, is an error (log in again).
func (c *Client) Check(ctx context.Context) error {
	c.mu.Lock()
	tok, exp := c.token, c.expires
	c.mu.Unlock()
	if tok == "" || time.Until(exp) < 5*time.Minute {
		return fmt.Errorf("keystone token expired")
	}
	u := c.creds.AuthURL + "/auth/tokens"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-Auth-Token", tok)
	req.Header.Set("X-Subject-Token", tok)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("keystone at %s: %w", c.creds.AuthURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return decodeError(http.MethodGet, u, resp)
	}
	io.Copy(io.Discard, resp.Body)
	return nil
}

// currentToken returns a token valid for at least another minute.
func (c *Client) currentToken(ctx context.Context) (string, error) {
	c.mu.Lock()
	tok, exp := c.token, c.expires
	c.mu.Unlock()
	if tok != "" && time.Until(exp) > time.Minute {
		return tok, nil
	}
	if err := c.login(ctx); err != nil {
		return "", err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.token, nil
}

// ProjectID is the ID of the project the token is scoped to.
func (c *Client) ProjectID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.projectID
}

// Endpoint is the URL of a service type (compute, image, network, ...) for
// the credentials' interface and region.
func (c *Client) Endpoint(serviceType string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return FindEndpoint(c.catalog, serviceType, c.creds.Interface, c.creds.Region)
}

// Catalog is the service catalog of the current token.
func (c *Client) Catalog() []CatalogEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]CatalogEntry(nil), c.catalog...)
}
