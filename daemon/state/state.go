package state

import (
	"context"
	"sync"
	"time"

	"github.com/osdcloud/osd/daemon/node"
	"github.com/osdcloud/osd/daemon/operations"
	"github.com/osdcloud/osd/daemon/store"
)

// State is what the daemon hands each resource package.
type State struct {
	Cfg  Config
	DB   *store.DB
	Ops  *operations.Manager
	Node *node.Node
	// Ctx ends when the daemon stops: background work started by a request uses it.
	Ctx context.Context
	// Stop stops the daemon for the reason given (a removed member's daemon stops itself).
	Stop func(error)
	// WG is waited for when the daemon stops (Go adds to it).
	WG *sync.WaitGroup
	// Started is when the daemon started.
	Started time.Time

	onceMu sync.Mutex
	once   map[string]bool
}

// Go runs f in the background until Ctx ends; the daemon waits for it when it stops.
func (s *State) Go(f func(ctx context.Context)) {
	s.WG.Add(1)
	go func() {
		defer s.WG.Done()
		f(s.Ctx)
	}()
}

// GoOnce runs f as Go does the first time it is called with name, and does nothing
// after that: a keeper a step starts once for the daemon's lifetime.
func (s *State) GoOnce(name string, f func(ctx context.Context)) {
	s.onceMu.Lock()
	defer s.onceMu.Unlock()
	if s.once[name] {
		return
	}
	if s.once == nil {
		s.once = map[string]bool{}
	}
	s.once[name] = true
	s.Go(f)
}

// Get reads key from the state store.
func (s *State) Get(ctx context.Context, key Key) (string, bool, error) { return Get(ctx, s.DB, key) }

// Set writes key to the state store.
func (s *State) Set(ctx context.Context, key Key, value string) error {
	return Set(ctx, s.DB, key, value)
}

// Is reports whether key holds value (false when unset or unreadable).
func (s *State) Is(ctx context.Context, key Key, value string) bool {
	v, ok, err := s.Get(ctx, key)
	return err == nil && ok && v == value
}
