package cluster

import (
	"errors"
	"testing"

	"github.com/osdcloud/osd/daemon/api"
)

func TestNodeStateOf(t *testing.T) {
	states := map[string]string{"node1": api.NodeReady, "node2": api.NodeNotReady}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"node1", nil, api.NodeReady}, {"node2", nil, api.NodeNotReady}, {"node3", nil, api.NodeAbsent}, {"node1", errors.New("down"), api.NodeUnknown},
	} {
		if got := NodeStateOf(states, c.err, c.name); got != c.want {
			t.Errorf("NodeStateOf(%s, %v) = %s, want %s", c.name, c.err, got, c.want)
		}
	}
}
