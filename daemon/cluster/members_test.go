package cluster

import (
	"errors"
	"testing"
)

func TestNodeStateOf(t *testing.T) {
	states := map[string]string{"node1": NodeReady, "node2": NodeNotReady}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"node1", nil, NodeReady}, {"node2", nil, NodeNotReady}, {"node3", nil, NodeAbsent}, {"node1", errors.New("down"), NodeUnknown},
	} {
		if got := NodeStateOf(states, c.err, c.name); got != c.want {
			t.Errorf("NodeStateOf(%s, %v) = %s, want %s", c.name, c.err, got, c.want)
		}
	}
}
