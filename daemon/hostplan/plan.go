package hostplan

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/osdcloud/osd/bootstrap"
	"github.com/osdcloud/osd/bootstrap/preflight"
	"github.com/osdcloud/osd/daemon/state"
	"github.com/osdcloud/osd/daemon/store"
	"github.com/osdcloud/osd/hypervisor"
	"github.com/osdcloud/osd/netsetup"
)

// HostSteps are the idempotent steps that prepare this host (osd's host firewall, KVM
// permissions, Open vSwitch, the external network, libvirt, the volume group), in order; only those named
// in want when it is not nil (a joining node prepares what its roles need, JoinSteps).
func HostSteps(st *state.State, dec preflight.Decisions, want map[string]bool) []bootstrap.Step {
	ovs := netsetup.DefaultOVSConfig()
	ovs.Datapath = dec.OVSDatapath
	all := []bootstrap.Step{
		{Name: StepFirewall, Run: func(ctx context.Context) (bool, string, error) { return firewall(ctx, st) }},
		{Name: "kvm-permissions", Run: func(ctx context.Context) (bool, string, error) {
			changed, err := hypervisor.EnsureKVMPermissions("/dev/kvm")
			return changed, "virt_type " + dec.VirtType + ": " + dec.VirtTypeReason, err
		}},
		{Name: "openvswitch", Run: func(ctx context.Context) (bool, string, error) {
			changed, err := netsetup.EnsureOVS(ctx, ovs)
			if err == nil {
				err = state.RecordOwner(ctx, st.DB, state.KeyOVSOwner, changed)
			}
			detail := "datapath " + ovs.Datapath
			if err == nil && ovs.Datapath == netsetup.DatapathNetdev {
				// vswitchd can take a new guest tap down on this datapath
				// (netsetup.KeepGuestTapsUp): keep them up while the daemon runs.
				st.GoOnce("guest-taps", func(ctx context.Context) { netsetup.KeepGuestTapsUp(ctx, ovs, nil) })
				detail += ", guest taps kept up"
			}
			return changed, detail, err
		}},
		{Name: "external-network", Needs: []string{"openvswitch"}, Run: func(ctx context.Context) (bool, string, error) { return externalNetwork(ctx, st, ovs) }},
		{Name: "tunnel", Needs: []string{"openvswitch"}, Run: func(ctx context.Context) (bool, string, error) { return tunnel(ctx, st, ovs) }},
		{Name: "libvirt", Needs: []string{"kvm-permissions"}, Run: func(ctx context.Context) (bool, string, error) {
			started, err := hypervisor.EnsureLibvirtd(ctx, hypervisor.LibvirtConfig{})
			if err == nil {
				err = state.RecordOwner(ctx, st.DB, state.KeyLibvirtOwner, started)
			}
			if err != nil {
				return started, "", err
			}
			info, err := hypervisor.CheckLibvirt(ctx, hypervisor.DefaultLibvirtSocket)
			if err == nil && started {
				restartCompute(ctx, st)
			}
			return started, fmt.Sprintf("libvirt %s, QEMU %s, domain types %v", info.LibVersion, info.HypervisorVersion, info.DomainTypes), err
		}},
		{Name: "volume-group", Run: func(ctx context.Context) (bool, string, error) {
			if dec.StorageBackend != "lvm" {
				return false, "skipped: " + dec.StorageBackendReason, nil
			}
			vg := VGSpec(st.Cfg)
			if h, err := st.Host(ctx); err == nil && h.Storage.Backend != "" && h.Storage.Size > 0 {
				vg.SizeBytes = h.Storage.Size // osd init --storage-size, or the size osd chose
			}
			changed, err := hypervisor.EnsureVolumeGroup(ctx, vg)
			return changed, "", err
		}},
	}
	if want == nil {
		return all
	}
	var out []bootstrap.Step
	for _, s := range all {
		if want[s.Name] {
			var needs []string
			for _, n := range s.Needs {
				if want[n] {
					needs = append(needs, n)
				}
			}
			s.Needs = needs
			out = append(out, s)
		}
	}
	return out
}

// StepFirewall is the host firewall's step: Kubernetes starts after it (a node's
// internals are never open while the daemon prepares the host).
const StepFirewall = "firewall"

// externalNetwork is the external-network step: br-ex and the network behind it, as the
// last osd init asked for.
func externalNetwork(ctx context.Context, st *state.State, ovs netsetup.OVSConfig) (bool, string, error) {
	ext, err := External(ctx, st)
	if err != nil {
		return false, "", err
	}
	if err := st.UpdateHost(ctx, func(h *store.Host) error { h.External = state.Network(ext); return nil }); err != nil {
		return false, "", err
	}
	host := ExternalHost(st.DB, ovs)
	applied, err := netsetup.ApplyExternalNetwork(ctx, host, netsetup.Spec{Datapath: ovs.Datapath, External: ext})
	return len(applied) > 0, externalDetail(ext, applied), err
}

// externalDetail describes the external network ext and, when the step changed the host,
// what it did (a re-run that changes something says what was not as it should be).
func externalDetail(ext netsetup.ExternalNetwork, applied []netsetup.Op) string {
	detail := ext.Bridge + " " + ext.CIDR + " via " + ext.GatewayIP + " (NAT)"
	if ext.Interface != "" {
		detail = ext.Bridge + " with " + ext.Interface
	}
	if len(applied) == 0 {
		return detail
	}
	did := make([]string, len(applied))
	for i, op := range applied {
		did[i] = op.String()
	}
	return detail + ": " + strings.Join(did, "; ")
}

// ExternalHost is where the external-network step keeps what it moved and changed
// (netsetup's saved state, in the host record), so osd reset can put it back.
func ExternalHost(db *store.DB, ovs netsetup.OVSConfig) netsetup.Host {
	return netsetup.Host{OVSSocket: ovs.Socket(), Saved: state.NetSaved(db, state.NetExternal)}
}

// External is the external network to converge to: what the last osd init asked for,
// else the daemon's configuration.
func External(ctx context.Context, st *state.State) (netsetup.ExternalNetwork, error) {
	h, err := st.Host(ctx)
	if err != nil {
		return st.Cfg.External, err
	}
	return WantedExternal(st.Cfg, h)
}

// WantedExternal is the external network of host record h: what osd init asked for, else
// the daemon's configuration, normalized (pure).
func WantedExternal(cfg state.Config, h store.Host) (netsetup.ExternalNetwork, error) {
	ext := cfg.External
	if h.ExternalWanted != nil {
		ext = state.FromNetwork(*h.ExternalWanted)
	}
	return ext.Normalize()
}

// VGSpec is the loop-backed volume group of cfg.
func VGSpec(cfg state.Config) hypervisor.VGSpec {
	return hypervisor.VGSpec{Name: "cinder-volumes", BackingFile: filepath.Join(cfg.StateDir, "cinder-volumes.img"), SizeBytes: cfg.VolumeGroupBytes}
}

// restartCompute deletes this node's nova-compute pod when libvirtd was (re)started while
// Kubernetes runs (a retry at boot, after libvirt failed first): the pod, crashing without
// libvirt and backing off for minutes, starts again at once and compute follows.
func restartCompute(ctx context.Context, st *state.State) {
	if !st.Node.Running() {
		return
	}
	cs, err := st.Node.Admin()
	if err != nil {
		return
	}
	err = cs.CoreV1().Pods("openstack").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/instance=nova,app.kubernetes.io/component=compute",
		FieldSelector: "spec.nodeName=" + st.Cfg.NodeName,
	})
	if err != nil {
		slog.Warn("restart nova-compute after libvirt started", "err", err)
		return
	}
	slog.Info("libvirt started while Kubernetes ran: restarted nova-compute on this node")
}
