package hostplan

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/deploy"
	"github.com/osdcloud/osd/daemon/state"
	"github.com/osdcloud/osd/daemon/store"
	"github.com/osdcloud/osd/netsetup"
)

func TestPublicPorts(t *testing.T) {
	got := PublicPorts(deploy.DefaultCatalog())
	want := []uint16{30000, 30004, 30080, 30292, 30500, 30680, 30696, 30774, 30776, 30778}
	if !slices.Equal(got, want) {
		t.Errorf("PublicPorts(DefaultCatalog()) = %v, want %v", got, want)
	}
}

func TestHostAddresses(t *testing.T) {
	got := HostAddresses([]string{"192.168.1.10:8443", "192.168.1.11", "[2001:db8::1]:8443", "127.0.0.1:8443",
		"node-a:8443", "0.0.0.0", "fe80::1%eth0", "::ffff:10.0.0.1"})
	want := []string{"192.168.1.10", "192.168.1.11", "2001:db8::1", "10.0.0.1"}
	if !slices.Equal(got, want) {
		t.Errorf("HostAddresses = %v, want %v", got, want)
	}
}

// TestUpdateFirewallPeers: peers are recorded, added to, taken out and replaced, and
// FirewallMembers has them beside this host's address and the store's members; before the
// firewall step ran nothing touches the kernel (this test's host keeps its ruleset).
func TestUpdateFirewallPeers(t *testing.T) {
	ctx := context.Background()
	st := memoryState(t)
	db := st.DB
	if err := db.AddMember(ctx, store.MemberRecord{Name: "node-b", Address: "192.168.1.11:8443", Fingerprint: "f", Roles: []string{"compute"}, JoinedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		replace, add, remove []string
		want                 []string
	}{
		{nil, []string{"192.168.1.12:50122", "192.168.1.12:8443"}, nil, []string{"192.168.1.10", "192.168.1.11", "192.168.1.12"}},
		{nil, []string{"[2001:db8::13]:8443"}, []string{"192.168.1.12:8443"}, []string{"192.168.1.10", "192.168.1.11", "2001:db8::13"}},
		{[]string{"192.168.1.20:8443", "10.98.0.1"}, nil, nil, []string{"10.98.0.1", "192.168.1.10", "192.168.1.11", "192.168.1.20"}},
	}
	for i, s := range steps {
		if err := UpdateFirewallPeers(ctx, st, s.replace, s.add, s.remove); err != nil {
			t.Fatalf("step %d: UpdateFirewallPeers = %v", i, err)
		}
		got, err := FirewallMembers(ctx, st)
		if err != nil || !slices.Equal(got, s.want) {
			t.Errorf("step %d: FirewallMembers = %v, %v, want %v", i, got, err, s.want)
		}
	}
}

// TestUpdateFirewallControl: the control sources read from the Nodes are recorded and the
// spec has them beside this host's addresses; before the firewall step ran nothing
// touches the kernel (this test's host keeps its ruleset).
func TestUpdateFirewallControl(t *testing.T) {
	ctx := context.Background()
	st := memoryState(t)
	for i, s := range []struct{ sources, want []string }{
		{nil, []string{"192.168.1.10"}},
		{[]string{"10.42.0.0/24", "192.168.1.10", "10.42.0.9/24"}, []string{"10.42.0.0/24", "192.168.1.10"}},
		{[]string{"10.42.0.0/24", "192.168.1.12", "not an address", "::ffff:192.168.1.13"}, []string{"10.42.0.0/24", "192.168.1.10", "192.168.1.12", "192.168.1.13"}},
	} {
		if i == 2 {
			// A joined node also counts the cluster it joined through.
			if err := RecordControlPeers(ctx, st, []string{"10.98.0.1:8443"}); err != nil {
				t.Fatal(err)
			}
			s.want = append([]string{"10.42.0.0/24", "10.98.0.1"}, s.want[1:]...)
		}
		if err := UpdateFirewallControl(ctx, st, s.sources); err != nil {
			t.Fatalf("step %d: UpdateFirewallControl = %v", i, err)
		}
		spec, err := FirewallSpec(ctx, st)
		if err != nil || !slices.Equal(spec.ControlSources, s.want) {
			t.Errorf("step %d: ControlSources = %v, %v, want %v", i, spec.ControlSources, err, s.want)
		}
		if _, err := netsetup.FirewallRules(spec); err != nil {
			t.Errorf("step %d: FirewallRules = %v", i, err)
		}
	}
}

// memoryState is the state of a host at 192.168.1.10 over an in-memory store (closed at
// cleanup).
func memoryState(t *testing.T) *state.State {
	t.Helper()
	db, err := store.OpenMemory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &state.State{DB: db, Cfg: state.Config{NodeIP: "192.168.1.10"}}
}
