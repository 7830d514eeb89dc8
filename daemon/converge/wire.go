package converge

import (
	"fmt"
	"time"

	"github.com/osdcloud/osd/bootstrap"
	"github.com/osdcloud/osd/bootstrap/preflight"
	"github.com/osdcloud/osd/daemon/api"
)

// WireFindings are preflight findings as the API shows them (pure).
func WireFindings(fs []preflight.Finding) []api.Finding {
	out := make([]api.Finding, len(fs))
	for i, f := range fs {
		out[i] = api.Finding{Check: f.Check, Status: string(f.Status), Message: f.Message, Fix: f.Fix}
	}
	return out
}

// WireDecisions are preflight's decisions as the API shows them (pure).
func WireDecisions(d preflight.Decisions) api.Decisions {
	return api.Decisions{VirtType: d.VirtType, VirtTypeReason: d.VirtTypeReason, OVSDatapath: d.OVSDatapath,
		OVSDatapathReason: d.OVSDatapathReason, StorageBackend: d.StorageBackend, StorageBackendReason: d.StorageBackendReason}
}

// StepLine is a step event as one progress line of an operation (pure).
func StepLine(e bootstrap.Event) string {
	took := e.Took.Round(100 * time.Millisecond)
	switch {
	case !e.Done:
		return e.Step + " ..."
	case e.Error != "" && e.RetryIn > 0:
		return fmt.Sprintf("%s: attempt %d FAILED: %s (%s); trying again in %s", e.Step, e.Attempt, e.Error, took, e.RetryIn.Round(time.Second))
	case e.Error != "":
		return fmt.Sprintf("%s: FAILED: %s (%s)", e.Step, e.Error, took)
	}
	msg := "unchanged"
	if e.Changed {
		msg = "changed"
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return fmt.Sprintf("%s: %s (%s)", e.Step, msg, took)
}
