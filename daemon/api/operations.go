package api

import "time"

// Operation states.
const (
	OperationRunning   = "running"
	OperationSucceeded = "succeeded"
	OperationFailed    = "failed"
	OperationCancelled = "cancelled"
)

// Operation is long work the API started and a client can follow: GET
// /1.0/operations/{id} answers its state and the progress events so far; DELETE cancels it.
type Operation struct {
	ID       string    `json:"id"`
	Kind     string    `json:"kind"` // init, join, images-build, launch, ...
	State    string    `json:"state"`
	Events   []string  `json:"events,omitempty"`
	Error    string    `json:"error,omitempty"`
	Result   any       `json:"result,omitempty"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished,omitzero"`
}

// Done reports whether the operation ended.
func (o Operation) Done() bool { return o.State != OperationRunning }
