package cluster

import (
	"slices"
	"testing"
)

// TestJoinerAddresses: only where the request came from, never the address it states (a
// token holder would choose what the firewall trusts: a guest's floating IP, say).
func TestJoinerAddresses(t *testing.T) {
	for _, c := range []struct {
		remote string
		want   []string
	}{
		{"192.168.1.11:50122", []string{"192.168.1.11"}},
		{"[2001:db8::11]:50122", []string{"2001:db8::11"}},
		{"192.168.1.11", []string{"192.168.1.11"}},
		{"node-b:50122", nil},
		{"", nil},
	} {
		if got := joinerAddresses(c.remote); !slices.Equal(got, c.want) {
			t.Errorf("joinerAddresses(%q) = %v, want %v", c.remote, got, c.want)
		}
	}
}
