package deploy

import "testing"

// TestPortProbePath: osd checks each public port at its Probe path when it has one
// (Horizon: a static file, not the dashboard's Django), else at its public URL's path.
func TestPortProbePath(t *testing.T) {
	tests := []struct {
		service, port, want string
	}{
		{"horizon", "public", "/horizon/static/dashboard/img/favicon.ico"},
		{"keystone", "public", "/v3"},
		{"nova", "public", "/v2.1"},
		{"heat", "public", ""},
	}
	for _, tt := range tests {
		svc, ok := DefaultCatalog().Service(tt.service)
		if !ok {
			t.Fatalf("no service %s in the catalog", tt.service)
		}
		p, ok := svc.Port(tt.port)
		if !ok {
			t.Fatalf("%s has no port %s", tt.service, tt.port)
		}
		if got := p.ProbePath(); got != tt.want {
			t.Errorf("%s %s ProbePath() = %q, want %q", tt.service, tt.port, got, tt.want)
		}
	}
	if got := (Port{Path: "/x", Probe: "/x/y"}).ProbePath(); got != "/x/y" {
		t.Errorf("ProbePath with Probe = %q, want /x/y", got)
	}
}
