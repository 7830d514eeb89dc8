package deployment

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/openstack"
)

// TestAdminLogin: the client the openstack step logged in with is reused (by the day-one
// step and the next run) only for the same credentials and only while fresh, and its
// token is checked without another login. A loopback server answers Keystone's login and
// token validation (a fake: only those two requests).
func TestAdminLogin(t *testing.T) {
	var logins, checks atomic.Int32
	revoked := atomic.Bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v3/auth/tokens":
			logins.Add(1)
			w.Header().Set("X-Subject-Token", "tok")
			w.WriteHeader(201)
			json.NewEncoder(w).Encode(map[string]any{"token": map[string]any{
				"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
				"project":    map[string]any{"id": "p1"}, "user": map[string]any{"id": "u1"}, "catalog": []any{}}})
		case r.Method == http.MethodGet && r.URL.Path == "/v3/auth/tokens":
			checks.Add(1)
			if revoked.Load() || r.Header.Get("X-Auth-Token") != "tok" || r.Header.Get("X-Subject-Token") != "tok" {
				w.WriteHeader(404)
				w.Write([]byte(`{"error": {"code": 404, "message": "Could not find token: tok."}}`))
				return
			}
			w.Write([]byte(`{"token": {}}`))
		default:
			w.WriteHeader(500)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	creds := openstack.Credentials{AuthURL: srv.URL + "/v3", Username: "admin", Password: "pw", ProjectName: "admin",
		UserDomainName: "Default", ProjectDomainName: "Default"}
	c, err := openstack.Authenticate(ctx, creds)
	if err != nil {
		t.Fatal(err)
	}
	var h adminLogin
	if got := h.get(creds); got != nil {
		t.Errorf("get() before put = %p, want nil", got)
	}
	h.put(c)
	other := creds
	other.Password = "changed"
	if got := h.get(other); got != nil {
		t.Errorf("get(other credentials) = %p, want nil", got)
	}
	if got := h.get(creds); got != c {
		t.Errorf("get() = %p, want the client put (%p)", got, c)
	}
	if err := c.Check(ctx); err != nil || logins.Load() != 1 || checks.Load() != 1 {
		t.Errorf("Check() = %v after %d logins, %d checks; want nil after 1 login, 1 check", err, logins.Load(), checks.Load())
	}
	revoked.Store(true)
	if err := c.Check(ctx); err == nil {
		t.Error("Check() of a token Keystone refuses = nil, want an error")
	}
	h.at = time.Now().Add(-loginAge - time.Second)
	if got := h.get(creds); got != nil {
		t.Errorf("get() of a stale client = %p, want nil", got)
	}
}
