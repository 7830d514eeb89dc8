package join

import (
	"encoding/base64"
	"github.com/osdcloud/osd/bootstrap"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/osdcloud/osd/bootstrap/preflight"
	"github.com/osdcloud/osd/daemon/cluster"
	"github.com/osdcloud/osd/daemon/state"
)

func TestValidateJoinToken(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tok := func(name string, exp time.Time) string {
		return cluster.Token{Name: name, Secret: base64.RawURLEncoding.EncodeToString(make([]byte, 32)), Fingerprint: strings.Repeat("0f", 32),
			Addresses: []string{"10.0.0.1:8443"}, Expires: exp}.Encode()
	}
	for _, c := range []struct {
		name, token, node, wantErr string
	}{
		{"good", tok("node2", now.Add(time.Minute)), "node2", ""},
		{"expired", tok("node2", now), "node2", "expired at 2026-01-01T12:00:00Z"},
		{"other node", tok("node3", now.Add(time.Minute)), "node2", "is for node3, but this node is called node2"},
		{"garbage", "%%%", "node2", "not valid base64"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ValidateJoinToken(c.token, c.node, now)
			if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Errorf("ValidateJoinToken(%s) = %v, want %q", c.name, err, c.wantErr)
			}
		})
	}
}

func TestJoinSteps(t *testing.T) {
	for _, c := range []struct {
		roles []string
		want  []string
	}{
		{[]string{"control"}, []string{"firewall"}},
		{[]string{"compute"}, []string{"firewall", "kvm-permissions", "libvirt", "openvswitch", "tunnel"}},
		{[]string{"network"}, []string{"external-network", "firewall", "openvswitch", "tunnel"}},
		{[]string{"storage"}, []string{"firewall", "volume-group"}},
		{[]string{"compute", "network"}, []string{"external-network", "firewall", "kvm-permissions", "libvirt", "openvswitch", "tunnel"}},
	} {
		var got []string
		for k := range JoinSteps(c.roles) {
			got = append(got, k)
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("JoinSteps(%v) = %v, want %v", c.roles, got, c.want)
		}
	}
}

// TestJoinPlanSkipsHostServices checks the plan a control node runs: no Open vSwitch, no
// libvirt, nothing on the host but its firewall and its Kubernetes agent.
func TestJoinPlanSkipsHostServices(t *testing.T) {
	s := &Service{st: &state.State{Cfg: state.Config{StateDir: t.TempDir()}}}
	for _, c := range []struct {
		roles []string
		want  []string
	}{
		{[]string{"control"}, []string{"firewall", "kubernetes-agent", "kubernetes-node", "cluster-member", "images"}},
		{[]string{"compute", "network"}, []string{"firewall", "kvm-permissions", "openvswitch", "external-network", "tunnel", "libvirt",
			"kubernetes-agent", "kubernetes-node", "cluster-member", "images"}},
	} {
		var got []string
		plan := s.plan(preflight.Decisions{}, Record{Roles: c.roles})
		for _, step := range plan {
			got = append(got, step.Name)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("plan(%v) = %v, want %v", c.roles, got, c.want)
		}
		if err := bootstrap.Validate(plan); err != nil {
			t.Errorf("plan(%v): %v", c.roles, err)
		}
	}
}

// TestJoinPlanOrder: the agent starts on the prepared host, the join completes once its
// node is Ready, and the images are fetched and imported after that (the cluster serves
// them to members only: JoinNeeds).
func TestJoinPlanOrder(t *testing.T) {
	s := &Service{st: &state.State{Cfg: state.Config{StateDir: t.TempDir()}}}
	needs := map[string][]string{}
	for _, step := range s.plan(preflight.Decisions{}, Record{Roles: []string{"compute"}}) {
		needs[step.Name] = step.Needs
	}
	for step, want := range map[string][]string{
		"kubernetes-agent": {"firewall", "kvm-permissions", "openvswitch", "tunnel", "libvirt"},
		"kubernetes-node":  {"kubernetes-agent"},
		"cluster-member":   {"kubernetes-node"},
		"images":           {"cluster-member"},
	} {
		if !slices.Equal(needs[step], want) {
			t.Errorf("plan: %s needs %v, want %v", step, needs[step], want)
		}
	}
}

func TestAgentTaints(t *testing.T) {
	for _, c := range []struct {
		roles []string
		want  []string
	}{
		{[]string{"compute"}, []string{"osd.cloud/no-control-plane=true:NoSchedule"}},
		{[]string{"compute", "network"}, []string{"osd.cloud/no-control-plane=true:NoSchedule"}},
		{[]string{"control", "compute"}, nil},
	} {
		if got := AgentTaints(c.roles); !slices.Equal(got, c.want) {
			t.Errorf("AgentTaints(%v) = %v, want %v", c.roles, got, c.want)
		}
	}
}
