package preflight

import (
	_ "embed"
	"fmt"
	"strings"
)

const (
	kib = int64(1) << 10
	gib = int64(1) << 30
)

// Requirements are the thresholds Evaluate judges facts against. A value
// below a Min* fails; below the matching Recommended* warns.
type Requirements struct {
	MinCPUs, RecommendedCPUs               int
	MinMemoryBytes, RecommendedMemoryBytes int64
	MinDiskBytes, RecommendedDiskBytes     int64
	Ports                                  []int    // must be free (or held by osd itself)
	Packages                               []string // missing: fail
	OptionalPackages                       []string // missing: warn
	QEMURBDPackage                         string   // QEMU's RBD driver; missing with the ceph backend: fail
	RequireRoot                            bool
}

// QEMURBDPackage holds QEMU's RBD block driver, with which the host's QEMU opens Ceph
// volumes in userspace (a "recommends" line of packages.txt).
const QEMURBDPackage = "qemu-block-extra"

// DefaultPorts are the host ports the embedded k3s and the osd daemon listen
// on. OpenStack's own APIs listen inside pods, not on the host.
//
//	6443  k3s/Kubernetes API (supervisor)   6444  kube-apiserver behind it
//	10248 kubelet healthz                   10249 kube-proxy metrics
//	10250 kubelet API                       10256 kube-proxy healthz
//	10257 kube-controller-manager           10259 kube-scheduler
//	8443  osd HTTPS API (cluster members, join)
func DefaultPorts() []int {
	return []int{6443, 6444, 8443, 10248, 10249, 10250, 10256, 10257, 10259}
}

// packagesTxt is the one list of the Debian packages osd needs on a host; the .deb's
// Depends and Recommends and test/deps.sh read the same file.
//
//go:embed packages.txt
var packagesTxt string

// DefaultPackages are the Debian packages osd runs on the host (the "depends" lines of
// packages.txt): the container runtime pieces k3s uses, Open vSwitch, libvirt with QEMU
// for nova-compute, the LVM tools, and what osd launch uses to reach a server.
func DefaultPackages() []string { return HostPackages(packagesTxt)["depends"] }

// DefaultOptionalPackages are needed only in some setups (the "recommends" lines):
// mmdebstrap builds the service images when no airgap bundle provides them; QEMU's RBD
// driver is needed by the ceph storage backend (Evaluate fails without it there).
func DefaultOptionalPackages() []string { return HostPackages(packagesTxt)["recommends"] }

// HostPackages parses a package list: "depends NAME" or "recommends NAME" a line, # to
// the end of a line is a comment. A malformed line panics: the list is built in.
func HostPackages(txt string) map[string][]string {
	out := map[string][]string{}
	for i, line := range strings.Split(txt, "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 || (f[0] != "depends" && f[0] != "recommends") {
			panic(fmt.Sprintf("packages.txt line %d: %q: want \"depends NAME\" or \"recommends NAME\"", i+1, line))
		}
		out[f[0]] = append(out[f[0]], f[1])
	}
	return out
}

// DefaultRequirements are sized for a single-node cloud (k3s ~0.7 GiB,
// control-plane services ~3-4 GiB, MariaDB/RabbitMQ, and room for guests):
//
//	CPUs:   fail below 2,      warn below 4
//	memory: fail below 8 GiB,  warn below 16 GiB
//	disk:   fail below 30 GiB, warn below 60 GiB free under the state dir
//	        (images ~2.5 GiB packed and again unpacked, k3s, Glance images,
//	        the Cinder backing file and instance disks)
func DefaultRequirements() Requirements {
	return Requirements{
		MinCPUs:                2,
		RecommendedCPUs:        4,
		MinMemoryBytes:         8 * gib,
		RecommendedMemoryBytes: 16 * gib,
		MinDiskBytes:           30 * gib,
		RecommendedDiskBytes:   60 * gib,
		Ports:                  DefaultPorts(),
		Packages:               DefaultPackages(),
		OptionalPackages:       DefaultOptionalPackages(),
		QEMURBDPackage:         QEMURBDPackage,
		RequireRoot:            true,
	}
}
