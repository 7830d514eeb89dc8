package api

import "time"

// Journal entry states.
const (
	StepStarted  = "started"
	StepFinished = "finished"
	StepFailed   = "failed"
)

// JournalEntry is one recorded execution of a host-preparation or deployment step.
type JournalEntry struct {
	ID         int64      `json:"id"`
	Run        string     `json:"run"`
	Step       string     `json:"step"`
	State      string     `json:"state"`
	Detail     string     `json:"detail,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}
