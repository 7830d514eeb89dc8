// Package reset undoes on the host what osd did (osd reset, with the daemon stopped):
// the cloud's guests and bridges, the external network, the host services osd started,
// the volume group, Kubernetes' leftovers and the kernel settings, then the state.
package reset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/osdcloud/osd/daemon/client"
	"github.com/osdcloud/osd/daemon/hostplan"
	"github.com/osdcloud/osd/daemon/k3s"
	"github.com/osdcloud/osd/daemon/ovnchassis"
	"github.com/osdcloud/osd/daemon/state"
	"github.com/osdcloud/osd/daemon/store"
	"github.com/osdcloud/osd/hypervisor"
	"github.com/osdcloud/osd/netsetup"
	"github.com/osdcloud/osd/netsetup/ovsdb"
)

// Reset removes what osd created on the host; the daemon must be stopped. It reads what
// to undo from the state store before removing it, does as much as it can, and reports
// every error (re-running it finishes the job).
func Reset(ctx context.Context, cfg state.Config, out io.Writer) error {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return err
	}
	if pid, held := client.LockHolder(cfg.StateDir); held {
		return fmt.Errorf("the osd daemon (pid %d) is still running on %s: stop it first", pid, cfg.StateDir)
	}
	// The state database says what to undo (the host record, with what netsetup saved,
	// and the configuration keys); it stays open until the state dir goes.
	conf := map[string]string{}
	var rec store.Host
	var db *store.DB
	if dbPath := filepath.Join(cfg.StateDir, "osd.db"); fileExists(dbPath) {
		if db, err = store.Open(ctx, dbPath); err != nil {
			return fmt.Errorf("read what osd changed on this host: %w", err)
		}
		defer db.Close()
		if rec, err = db.Host(ctx); err != nil {
			return fmt.Errorf("read what osd changed on this host: %w", err)
		}
		if conf, err = db.AllConfig(ctx); err != nil {
			return err
		}
	}
	var errs []error
	// A host prepared by osd init or by osd join (compute and network roles set up OVS,
	// libvirt and the external network too).
	if db != nil && (rec.Initialized || rec.Join != nil) {
		errs = append(errs, host(ctx, cfg, db, rec, conf, out)...)
	}
	// Kubernetes' leftovers, and the kernel settings as they were before osd's first run.
	sysctls := map[string]string{}
	if v := conf[string(state.KeySysctls)]; v != "" {
		json.Unmarshal([]byte(v), &sysctls)
	}
	// Pod namespaces hidden under a /run/netns mount stacked on top of them (see
	// ensureSharedNetnsDir) are unpinned first, so the cleanup below can remove them.
	if n, err := netsetup.UnpinHiddenNetns(); err != nil {
		errs = append(errs, err)
	} else if n > 0 {
		fmt.Fprintf(out, "unpinned %d hidden pod network namespaces\n", n)
	}
	rep, err := k3s.Cleanup(ctx, cfg.Paths(), sysctls)
	errs = append(errs, err)
	fmt.Fprintf(out, "killed %d processes, unmounted %d mounts\n", rep.Killed, rep.Unmounted)
	for _, r := range rep.Removed {
		fmt.Fprintf(out, "removed %s\n", r)
	}
	// The host firewall goes once nothing of the cloud listens any more.
	if removed, err := netsetup.DeleteFirewall(""); err != nil {
		errs = append(errs, fmt.Errorf("host firewall: %w", err))
	} else if removed {
		fmt.Fprintf(out, "removed nftables table inet %s\n", netsetup.FilterTable)
	}

	// The state dir goes last: it held what the steps above needed to know.
	if db != nil {
		db.Close()
	}
	for _, d := range []string{cfg.RunDir, cfg.StateDir} {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// stopByPidfile sends SIGTERM to the process named in pidfile.
func stopByPidfile(pidfile string) bool {
	b, err := os.ReadFile(pidfile)
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return false
	}
	return syscall.Kill(pid, syscall.SIGTERM) == nil
}

// novaStateDir is where nova-compute keeps instance disks and kernels: the same path on the
// host and in its pod, because the host's libvirt opens those files.
const novaStateDir = "/var/lib/nova"

// cloud removes what the cloud left on the host outside osd's own directories: Nova's
// guests and osd's Ceph secrets in the host's libvirt, OVN's integration bridge, the
// metadata agent's namespaces, the routes to other nodes' pods and Nova's instance files.
// It runs while libvirtd and Open vSwitch still run.
func cloud(ctx context.Context, ovsSocket string, out io.Writer) []error {
	var errs []error
	if fileExists(hypervisor.DefaultLibvirtSocket) {
		n, err := hypervisor.DestroyInstances(ctx, hypervisor.DefaultLibvirtSocket)
		if err != nil {
			errs = append(errs, err)
		}
		if n > 0 {
			fmt.Fprintf(out, "destroyed %d instances\n", n)
		}
		if n, err := hypervisor.RemoveOSDSecrets(ctx, hypervisor.DefaultLibvirtSocket); err != nil {
			errs = append(errs, err)
		} else if n > 0 {
			fmt.Fprintf(out, "removed %d libvirt secrets of Ceph clients\n", n)
		}
	}
	if fileExists(ovsSocket) {
		if o, err := ovsdb.Connect(ctx, ovsSocket); err != nil {
			errs = append(errs, fmt.Errorf("open vswitch: %w", err))
		} else {
			if deleted, err := o.DeleteBridge(ctx, "br-int"); err != nil {
				errs = append(errs, fmt.Errorf("delete br-int: %w", err))
			} else if deleted {
				fmt.Fprintln(out, "removed bridge br-int")
			}
			o.Close()
		}
	}
	removed, err := netsetup.RemoveOVNNamespaces()
	for _, ns := range removed {
		fmt.Fprintf(out, "removed network namespace %s\n", ns)
	}
	if err != nil {
		errs = append(errs, err)
	}
	if n, err := netsetup.RemovePodRoutes(); err != nil {
		errs = append(errs, fmt.Errorf("pod routes: %w", err))
	} else if n > 0 {
		fmt.Fprintf(out, "removed %d routes to other nodes' pods\n", n)
	}
	if fileExists(novaStateDir) {
		if err := k3s.ClearDir(novaStateDir); err != nil {
			errs = append(errs, err)
		} else {
			fmt.Fprintf(out, "removed %s\n", novaStateDir)
		}
	}
	// The OVN chassis certificate (its CA goes with the cluster).
	if fileExists(ovnchassis.Dir) {
		if err := os.RemoveAll(ovnchassis.Dir); err != nil {
			errs = append(errs, err)
		} else {
			fmt.Fprintf(out, "removed %s\n", ovnchassis.Dir)
		}
	}
	return errs
}

// host undoes the host preparation: the cloud's leftovers, the external network, the host
// services osd started and the volume group.
func host(ctx context.Context, cfg state.Config, db *store.DB, rec store.Host, conf map[string]string, out io.Writer) []error {
	var errs []error
	ovs := netsetup.DefaultOVSConfig()
	var ext netsetup.ExternalNetwork
	if rec.External != nil {
		ext = state.FromNetwork(*rec.External)
	}
	errs = append(errs, cloud(ctx, ovs.Socket(), out)...)
	if fileExists(ovs.Socket()) {
		th := hostplan.TunnelHost(db, ovs)
		iface, err := th.MovedInterface()
		if err == nil {
			var removed bool
			if removed, err = netsetup.RemoveTunnelBridge(ctx, th, iface); removed && err == nil {
				fmt.Fprintf(out, "removed tunnel bridge %s (%s has its addresses back)\n", netsetup.TunnelBridge, iface)
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("tunnel bridge: %w", err))
		}
	}
	if fileExists(ovs.Socket()) {
		h := hostplan.ExternalHost(db, ovs)
		if err := netsetup.Teardown(ctx, h, netsetup.Spec{Datapath: ovs.Datapath, External: ext}); err != nil {
			errs = append(errs, fmt.Errorf("external network: %w", err))
		} else {
			fmt.Fprintf(out, "removed external network %s\n", ext.Bridge)
		}
	}
	if conf[string(state.KeyOVSOwner)] == state.OwnerOSD {
		if err := netsetup.StopOVS(ctx, ovs); err != nil {
			errs = append(errs, fmt.Errorf("stop Open vSwitch: %w", err))
		} else {
			fmt.Fprintln(out, "stopped Open vSwitch")
		}
	}
	if conf[string(state.KeyLibvirtOwner)] == state.OwnerOSD {
		for _, name := range []string{"libvirtd", "virtlogd"} {
			if stopByPidfile("/run/" + name + ".pid") {
				fmt.Fprintf(out, "stopped %s\n", name)
			}
		}
	}
	vg := hostplan.VGSpec(cfg)
	if fileExists(vg.BackingFile) {
		if err := hypervisor.RemoveVolumeGroup(ctx, vg); err != nil {
			errs = append(errs, fmt.Errorf("volume group: %w", err))
		} else {
			fmt.Fprintf(out, "removed volume group %s\n", vg.Name)
		}
	}
	return errs
}
