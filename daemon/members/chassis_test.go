package members

import (
	"testing"

	"github.com/osdcloud/osd/netsetup/ovnsb"
)

func TestChassisTaken(t *testing.T) {
	sb := []ovnsb.ChassisInfo{{Name: "aaaa", Hostname: "node1"}, {Name: "bbbb", Hostname: "node2"}, {Name: "cccc"}}
	for _, tt := range []struct {
		member, id string
		taken      bool
	}{
		{"node1", "aaaa", false}, // its own chassis (renewal)
		{"node3", "dddd", false}, // a chassis not registered yet
		{"node2", "aaaa", true},  // another host's
		{"node3", "bbbb", true},
		{"node3", "cccc", true}, // no host recorded: not given away
	} {
		if err := chassisTaken(sb, tt.member, tt.id); (err != nil) != tt.taken {
			t.Errorf("chassisTaken(%s, %s) = %v, want taken %v", tt.member, tt.id, err, tt.taken)
		}
	}
}
