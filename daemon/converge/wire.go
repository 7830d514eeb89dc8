package converge

import (
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
