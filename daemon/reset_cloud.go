package daemon

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/osdcloud/osd/hypervisor"
	"github.com/osdcloud/osd/netsetup/ovsdb"
	"golang.org/x/sys/unix"
)

// novaStateDir is where nova-compute keeps instance disks and kernels: the same path on the
// host and in its pod, because the host's libvirt opens those files.
const novaStateDir = "/var/lib/nova"

// isInstanceDomain says whether a libvirt domain is a Nova instance (Nova names them
// instance-XXXXXXXX by default).
func isInstanceDomain(name string) bool { return strings.HasPrefix(name, "instance-") }

// isOVNNamespace says whether a network namespace is one the OVN metadata agent made.
func isOVNNamespace(name string) bool { return strings.HasPrefix(name, "ovnmeta-") }

// resetCloud removes what the cloud left on the host outside osd's own directories: Nova's
// guests in the host's libvirt, OVN's integration bridge, the metadata agent's namespaces and
// Nova's instance files. It runs while libvirtd and Open vSwitch still run.
func resetCloud(ctx context.Context, ovsSocket string, out io.Writer) []error {
	var errs []error
	if fileExists(hypervisor.DefaultLibvirtSocket) {
		n, err := destroyInstances(ctx)
		if err != nil {
			errs = append(errs, err)
		}
		if n > 0 {
			fmt.Fprintf(out, "destroyed %d instances\n", n)
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
	if ents, err := os.ReadDir(netnsDir); err == nil {
		for _, e := range ents {
			if !isOVNNamespace(e.Name()) {
				continue
			}
			p := filepath.Join(netnsDir, e.Name())
			unix.Unmount(p, unix.MNT_DETACH)
			if err := os.Remove(p); err != nil {
				errs = append(errs, fmt.Errorf("remove namespace %s: %w", e.Name(), err))
			} else {
				fmt.Fprintf(out, "removed network namespace %s\n", e.Name())
			}
		}
	}
	if n, err := removePodRoutes(); err != nil {
		errs = append(errs, fmt.Errorf("pod routes: %w", err))
	} else if n > 0 {
		fmt.Fprintf(out, "removed %d routes to other nodes' pods\n", n)
	}
	if fileExists(novaStateDir) {
		if err := os.RemoveAll(novaStateDir); err != nil {
			errs = append(errs, err)
		} else {
			fmt.Fprintf(out, "removed %s\n", novaStateDir)
		}
	}
	return errs
}

// destroyInstances stops and undefines Nova's guests in the host's libvirt.
func destroyInstances(ctx context.Context) (int, error) {
	l, err := hypervisor.Connect(ctx, hypervisor.DefaultLibvirtSocket)
	if err != nil {
		return 0, err
	}
	defer l.Disconnect()
	doms, _, err := l.ConnectListAllDomains(1, 0)
	if err != nil {
		return 0, fmt.Errorf("list libvirt domains: %w", err)
	}
	n := 0
	for _, d := range doms {
		if !isInstanceDomain(d.Name) {
			continue
		}
		l.DomainDestroy(d) // fails when it is not running: undefine still applies
		// Flags: also drop managed save images, snapshots metadata and NVRAM.
		if err := l.DomainUndefineFlags(d, 1|2|4); err != nil {
			return n, fmt.Errorf("undefine %s: %w", d.Name, err)
		}
		n++
	}
	return n, nil
}
