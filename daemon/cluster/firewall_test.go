package cluster

import (
	"slices"
	"testing"
)

func TestJoinerAddresses(t *testing.T) {
	for _, c := range []struct {
		remote, stated string
		want           []string
	}{
		{"192.168.1.11:50122", "192.168.1.11:8443", []string{"192.168.1.11"}},
		{"192.168.1.11:50122", "10.0.0.11:8443", []string{"192.168.1.11", "10.0.0.11"}},
		{"[2001:db8::11]:50122", "node-b:8443", []string{"2001:db8::11"}},
		{"", "", nil},
	} {
		if got := joinerAddresses(c.remote, c.stated); !slices.Equal(got, c.want) {
			t.Errorf("joinerAddresses(%q, %q) = %v, want %v", c.remote, c.stated, got, c.want)
		}
	}
}
