package cluster

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/rest"
)

// FuzzJoinRequest feeds arbitrary bodies to the unauthenticated join endpoint's decoding
// and validation: it must never panic, and every refusal must be a client error (4xx),
// never a 500, and must not issue a certificate.
func FuzzJoinRequest(f *testing.F) {
	f.Add([]byte(`{"name":"node2","secret":"s","address":"10.0.0.2:7443","csr":"-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n"}`))
	f.Add([]byte(`{"name":"node2","secret":"s","roles":["gpu"],"address":"10.0.0.2:7443"}`))
	f.Add([]byte(`{"name":"NODE","secret":"","address":"x"}`))
	f.Add([]byte(`{"name":"node2","extra":1}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"roles":{}}`))
	f.Add([]byte("\x00\xff"))
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/1.0/cluster/join", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		var req api.JoinRequest
		if err := rest.DecodeJSON(r, &req, maxJoinBody); err != nil {
			if code := rest.StatusFor(err); code < 400 || code >= 500 {
				t.Fatalf("DecodeJSON(%q) status %d (%v), want 4xx", body, code, err)
			}
			return
		}
		deps := &fakeJoinDeps{verifyErr: errorf(ErrTokenInvalid, "no")}
		_, err := HandleJoin(context.Background(), deps, req)
		if code := rest.StatusFor(err); code < 400 || code >= 500 {
			t.Fatalf("HandleJoin(%+v) status %d (%v), want 4xx", req, code, err)
		}
		if len(deps.issued) != 0 {
			t.Fatalf("HandleJoin(%+v) issued a certificate with a bad secret", req)
		}
	})
}
