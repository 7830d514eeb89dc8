package hostplan

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/osdcloud/osd/bootstrap"
	"github.com/osdcloud/osd/bootstrap/preflight"
	"github.com/osdcloud/osd/daemon/k3s"
	"github.com/osdcloud/osd/daemon/rest"
	"github.com/osdcloud/osd/daemon/state"
	"github.com/osdcloud/osd/netsetup"
)

// RecordSysctls records the kernel settings as they are before osd first changes them,
// for reset (the first run only).
func RecordSysctls(ctx context.Context, st *state.State) error {
	if _, ok, err := st.Get(ctx, state.KeySysctls); err != nil || ok {
		return err
	}
	b, _ := json.Marshal(k3s.ReadSysctls())
	if err := st.Set(ctx, state.KeySysctls, string(b)); err != nil {
		return fmt.Errorf("record sysctls: %w", err)
	}
	return nil
}

// PreflightConfig is what preflight probes on this host.
func PreflightConfig(cfg state.Config) preflight.ProbeConfig {
	return preflight.ProbeConfig{StateDir: cfg.StateDir, RunDir: cfg.RunDir, SelfPIDs: []int{os.Getpid()}, SelfExe: cfg.Self}
}

// CheckTunnelInterface checks a wanted tunnel interface: auto, none or an interface of
// this host (400 saying what exists otherwise).
func CheckTunnelInterface(name string) error {
	if name == netsetup.TunnelAuto || name == netsetup.TunnelNone {
		return nil
	}
	if name == netsetup.TunnelBridge {
		return rest.Errorf(rest.ErrBadRequest, "tunnel interface %s is the bridge osd moves the tunnel interface into: name the interface that reaches the other nodes", name)
	}
	if _, err := net.InterfaceByName(name); err != nil {
		return rest.Errorf(rest.ErrBadRequest, "tunnel interface %q: %v (ip link lists the host's interfaces; auto and none are also accepted)", name, err)
	}
	return nil
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
