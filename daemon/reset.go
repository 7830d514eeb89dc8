package daemon

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

	"github.com/osdcloud/osd/daemon/k3s"
	"github.com/osdcloud/osd/daemon/store"
	"github.com/osdcloud/osd/hypervisor"
	"github.com/osdcloud/osd/netsetup"
)

// Store keys that say which host services osd started itself (and so stops on reset)
// and what external network it made.
const (
	configOVSOwner     = "host.ovs_owner"     // "osd" or "host"
	configLibvirtOwner = "host.libvirt_owner" // "osd" or "host"
	configExternal     = "host.external_network"
)

// recordOwner remembers, the first time only, whether osd started a host service.
func (d *Daemon) recordOwner(ctx context.Context, key string, started bool) error {
	if _, ok, err := d.db.GetConfig(ctx, key); err != nil || ok {
		return err
	}
	owner := "host"
	if started {
		owner = "osd"
	}
	return d.db.SetConfig(ctx, key, owner)
}

// Reset removes what osd created on the host; the daemon must be stopped. It reads what
// to undo from the state store before removing it, does as much as it can, and reports
// every error (re-running it finishes the job).
func Reset(ctx context.Context, cfg Config, out io.Writer) error {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return err
	}
	if pid, held := LockHolder(cfg.StateDir); held {
		return fmt.Errorf("the osd daemon (pid %d) is still running on %s: stop it first", pid, cfg.StateDir)
	}
	conf := map[string]string{}
	if dbPath := filepath.Join(cfg.StateDir, "osd.db"); fileExists(dbPath) {
		db, err := store.Open(ctx, dbPath)
		if err != nil {
			return fmt.Errorf("read what osd changed on this host: %w", err)
		}
		conf, err = db.AllConfig(ctx)
		db.Close()
		if err != nil {
			return err
		}
	}
	var errs []error
	// A host prepared by osd init or by osd join (compute and network roles set up OVS,
	// libvirt and the external network too).
	if conf[configInitialized] == "true" || conf[configJoin] != "" {
		ovs := netsetup.DefaultOVSConfig()
		var ext netsetup.ExternalNetwork
		json.Unmarshal([]byte(conf[configExternal]), &ext)
		errs = append(errs, resetCloud(ctx, ovs.Socket(), out)...)
		if fileExists(ovs.Socket()) {
			host := netsetup.Host{OVSSocket: ovs.Socket(), StateDir: filepath.Join(cfg.StateDir, "host")}
			if err := netsetup.Teardown(ctx, host, netsetup.Spec{Datapath: ovs.Datapath, External: ext}); err != nil {
				errs = append(errs, fmt.Errorf("external network: %w", err))
			} else {
				fmt.Fprintf(out, "removed external network %s\n", ext.Bridge)
			}
		}
		if conf[configOVSOwner] == "osd" {
			if err := netsetup.StopOVS(ctx, ovs); err != nil {
				errs = append(errs, fmt.Errorf("stop Open vSwitch: %w", err))
			} else {
				fmt.Fprintln(out, "stopped Open vSwitch")
			}
		}
		if conf[configLibvirtOwner] == "osd" {
			for _, name := range []string{"libvirtd", "virtlogd"} {
				if stopByPidfile("/run/" + name + ".pid") {
					fmt.Fprintf(out, "stopped %s\n", name)
				}
			}
		}
		vg := hypervisor.VGSpec{Name: "cinder-volumes", BackingFile: filepath.Join(cfg.StateDir, "cinder-volumes.img")}
		if fileExists(vg.BackingFile) {
			if err := hypervisor.RemoveVolumeGroup(ctx, vg); err != nil {
				errs = append(errs, fmt.Errorf("volume group: %w", err))
			} else {
				fmt.Fprintf(out, "removed volume group %s\n", vg.Name)
			}
		}
	}
	// Kubernetes' leftovers, and the kernel settings as they were before osd's first run.
	sysctls := map[string]string{}
	if v := conf[configSysctls]; v != "" {
		json.Unmarshal([]byte(v), &sysctls)
	}
	// Pod namespaces hidden under a /run/netns mount stacked on top of them (see
	// ensureSharedNetnsDir) are unpinned first, so the cleanup below can remove them.
	if n, err := unpinHiddenNetns(); err != nil {
		errs = append(errs, err)
	} else if n > 0 {
		fmt.Fprintf(out, "unpinned %d hidden pod network namespaces\n", n)
	}
	rep, err := k3s.Cleanup(ctx, cfg.paths(), sysctls)
	errs = append(errs, err)
	fmt.Fprintf(out, "killed %d processes, unmounted %d mounts\n", rep.Killed, rep.Unmounted)
	for _, r := range rep.Removed {
		fmt.Fprintf(out, "removed %s\n", r)
	}

	// The state dir goes last: it held what the steps above needed to know.
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
