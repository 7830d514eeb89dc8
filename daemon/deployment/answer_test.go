package deployment

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/deploy"
)

// The endpoint probe names itself, so that a service started on demand (heat-server's
// gate) answers it without starting; any answer below 500 counts.
func TestProbeUserAgentAndStatus(t *testing.T) {
	for _, tc := range []struct {
		status  int
		wantWhy bool
	}{{200, false}, {300, false}, {401, false}, {503, true}} {
		var agent string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			agent = r.UserAgent()
			w.WriteHeader(tc.status)
		}))
		why := probe(context.Background(), &http.Client{Timeout: 2 * time.Second}, srv.URL+"/")
		srv.Close()
		if agent != deploy.ProbeUserAgent {
			t.Errorf("status %d: probe's User-Agent = %q, want %q", tc.status, agent, deploy.ProbeUserAgent)
		}
		if (why != "") != tc.wantWhy {
			t.Errorf("status %d: probe says %q, want a reason: %v", tc.status, why, tc.wantWhy)
		}
	}
}
