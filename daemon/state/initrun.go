package state

import (
	"sync"

	"github.com/osdcloud/osd/daemon/api"
)

// InitRun is the current or last converge run as GET /1.0/init shows it: the init
// resource (daemon/converge) runs it and writes it; the deployment resource reads how far
// it is (why the cloud cannot be used yet) and adds Horizon's address once the cloud is
// up. Both are given the same InitRun when they are made. Safe for concurrent use.
type InitRun struct {
	mu  sync.Mutex
	cur api.InitState
}

// NewInitRun returns the run of a daemon that has not converged yet (idle).
func NewInitRun() *InitRun { return &InitRun{cur: api.InitState{State: api.ConvergeIdle}} }

// Snapshot is a copy of the run as it is now.
func (r *InitRun) Snapshot() api.InitState {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.cur
	c.Steps = append([]api.Step(nil), r.cur.Steps...)
	return c
}

// Update changes the run with f.
func (r *InitRun) Update(f func(*api.InitState)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.cur)
}

// SetDashboard records Horizon's address for the run's answer.
func (r *InitRun) SetDashboard(url string) { r.Update(func(c *api.InitState) { c.Dashboard = url }) }
