package converge

import (
	"testing"
	"time"

	"github.com/osdcloud/osd/bootstrap/preflight"
	"github.com/osdcloud/osd/daemon/api"
)

func TestWire(t *testing.T) {
	fs := WireFindings([]preflight.Finding{{Check: "cpu", Status: preflight.Fail, Message: "m", Fix: "f"}})
	if len(fs) != 1 || fs[0].Status != "fail" || fs[0].Fix != "f" {
		t.Errorf("WireFindings() = %+v, want the finding with status fail", fs)
	}
	d := WireDecisions(preflight.Decisions{VirtType: "qemu", OVSDatapath: "netdev", StorageBackend: "ceph", StorageBackendReason: "r"})
	if d.VirtType != "qemu" || d.OVSDatapath != "netdev" || d.StorageBackend != "ceph" || d.StorageBackendReason != "r" {
		t.Errorf("WireDecisions() = %+v, want every field", d)
	}
}

func TestSetStep(t *testing.T) {
	var steps []api.Step
	steps = SetStep(steps, api.Step{Step: "kubernetes", Index: 6})
	steps = SetStep(steps, api.Step{Step: "libvirt", Index: 4, Attempt: 1, Done: true, Error: "x", RetryIn: time.Second})
	steps = SetStep(steps, api.Step{Step: "libvirt", Index: 4, Attempt: 2})
	if len(steps) != 2 || steps[0].Step != "libvirt" || steps[0].Attempt != 2 || steps[0].Done || steps[1].Step != "kubernetes" {
		t.Errorf("SetStep() = %+v, want libvirt's second attempt then kubernetes, in plan order", steps)
	}
}
