package netsetup

// Reverter collects undo functions for a multi-step host change, in the style of LXD's
// shared/revert: Add after each step succeeds, defer Fail, and call Success once the
// whole change is complete. Fail runs the undo functions in reverse order.
type Reverter struct {
	fns []func()
}

// NewReverter returns an empty Reverter.
func NewReverter() *Reverter { return &Reverter{} }

// Add records undo functions for a step that succeeded.
func (r *Reverter) Add(fns ...func()) { r.fns = append(r.fns, fns...) }

// Fail runs the recorded undo functions, last first, once. It does nothing after Success.
func (r *Reverter) Fail() {
	fns := r.fns
	r.fns = nil
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

// Success forgets the undo functions: the change is kept.
func (r *Reverter) Success() { r.fns = nil }

// Len returns the number of recorded undo functions.
func (r *Reverter) Len() int { return len(r.fns) }
