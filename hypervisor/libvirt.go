package hypervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/digitalocean/go-libvirt"
	"github.com/digitalocean/go-libvirt/socket/dialers"
	"libvirt.org/go/libvirtxml"
)

// Default paths of the libvirt daemons as Debian installs them.
const (
	DefaultLibvirtSocket = "/run/libvirt/libvirt-sock"
	DefaultVirtlogSocket = "/run/libvirt/virtlogd-sock"
)

// LibvirtConfig says where the libvirt daemons and their sockets are. Zero
// fields take the Debian defaults.
type LibvirtConfig struct {
	Socket        string        // libvirtd's read-write socket
	VirtlogSocket string        // virtlogd's socket
	Libvirtd      string        // libvirtd binary (default: found on PATH)
	Virtlogd      string        // virtlogd binary (default: found on PATH)
	StartTimeout  time.Duration // how long to wait for the socket to answer (default 30 s)
}

func (c LibvirtConfig) withDefaults() LibvirtConfig {
	if c.Socket == "" {
		c.Socket = DefaultLibvirtSocket
	}
	if c.VirtlogSocket == "" {
		c.VirtlogSocket = DefaultVirtlogSocket
	}
	if c.Libvirtd == "" {
		c.Libvirtd = "libvirtd"
	}
	if c.Virtlogd == "" {
		c.Virtlogd = "virtlogd"
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 30 * time.Second
	}
	return c
}

// socketAnswers reports whether something accepts connections on a unix socket.
func socketAnswers(path string) bool {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// EnsureLibvirtd makes libvirtd (and virtlogd, which it needs for guest
// consoles and logs) answer on their sockets. A daemon already answering,
// whoever started it (systemd, a service script, a previous osd), is left
// alone; a missing one is started directly with -d, which needs no systemd.
// started reports whether anything was started.
func EnsureLibvirtd(ctx context.Context, cfg LibvirtConfig) (started bool, err error) {
	cfg = cfg.withDefaults()
	for _, d := range []struct{ bin, sock string }{
		{cfg.Virtlogd, cfg.VirtlogSocket},
		{cfg.Libvirtd, cfg.Socket},
	} {
		if socketAnswers(d.sock) {
			continue
		}
		slog.Info("starting libvirt daemon", "binary", d.bin, "socket", d.sock)
		out, err := exec.CommandContext(ctx, d.bin, "-d").CombinedOutput()
		if err != nil {
			return started, fmt.Errorf("start %s -d: %w: %s", d.bin, err, out)
		}
		started = true
		if err := waitSocket(ctx, d.sock, cfg.StartTimeout); err != nil {
			return started, fmt.Errorf("%s started but: %w", d.bin, err)
		}
	}
	return started, nil
}

func waitSocket(ctx context.Context, path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for !socketAnswers(path) {
		if time.Now().After(deadline) {
			return fmt.Errorf("socket %s not answering after %s", path, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// Connect opens a go-libvirt connection to qemu:///system over the unix
// socket. It gives up when ctx ends; the caller must Disconnect the result.
func Connect(ctx context.Context, socket string) (*libvirt.Libvirt, error) {
	if socket == "" {
		socket = DefaultLibvirtSocket
	}
	timeout := 15 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	l := libvirt.NewWithDialer(dialers.NewLocal(dialers.WithSocket(socket), dialers.WithLocalTimeout(timeout)))
	done := make(chan error, 1)
	go func() { done <- l.ConnectToURI(libvirt.QEMUSystem) }()
	select {
	case err := <-done:
		if err != nil {
			return nil, fmt.Errorf("connect to libvirt at %s: %w", socket, err)
		}
		return l, nil
	case <-ctx.Done():
		go func() {
			if <-done == nil {
				_ = l.Disconnect()
			}
		}()
		return nil, fmt.Errorf("connect to libvirt at %s: %w", socket, ctx.Err())
	}
}

// Info is what CheckLibvirt learned from a running libvirtd.
type Info struct {
	LibVersion        string   `json:"lib_version"`        // libvirt, e.g. "9.0.0"
	HypervisorType    string   `json:"hypervisor_type"`    // driver name, e.g. "QEMU"
	HypervisorVersion string   `json:"hypervisor_version"` // QEMU's version, e.g. "7.2.0"
	HostArch          string   `json:"host_arch"`
	DomainTypes       []string `json:"domain_types"` // offered for the host arch, sorted: "kvm", "qemu"
	KVMOffered        bool     `json:"kvm_offered"`
	// ConnectSeconds is how long connecting and the first calls took; tens
	// of seconds mean libvirt is re-probing QEMU (see EnsureKVMPermissions).
	ConnectSeconds float64 `json:"connect_seconds"`
}

// CheckLibvirt connects to libvirtd and reports its versions and whether it
// offers domain type kvm. libvirt offers kvm whenever /dev/kvm opens, even
// where guests then hang (PVM): decide virt_type with DecideVirtType, not here.
func CheckLibvirt(ctx context.Context, socket string) (Info, error) {
	start := time.Now()
	l, err := Connect(ctx, socket)
	if err != nil {
		return Info{}, err
	}
	defer l.Disconnect()
	info, err := queryInfo(ctx, l)
	info.ConnectSeconds = time.Since(start).Seconds()
	return info, err
}

func queryInfo(ctx context.Context, l *libvirt.Libvirt) (Info, error) {
	type result struct {
		info Info
		err  error
	}
	done := make(chan result, 1)
	go func() {
		info, err := queryInfoSync(l)
		done <- result{info, err}
	}()
	select {
	case r := <-done:
		return r.info, r.err
	case <-ctx.Done():
		return Info{}, fmt.Errorf("query libvirt: %w", ctx.Err())
	}
}

func queryInfoSync(l *libvirt.Libvirt) (Info, error) {
	var info Info
	lib, err := l.ConnectGetLibVersion()
	if err != nil {
		return info, fmt.Errorf("libvirt version: %w", err)
	}
	info.LibVersion = formatVersion(lib)
	if info.HypervisorType, err = l.ConnectGetType(); err != nil {
		return info, fmt.Errorf("hypervisor type: %w", err)
	}
	hv, err := l.ConnectGetVersion()
	if err != nil {
		return info, fmt.Errorf("hypervisor version: %w", err)
	}
	info.HypervisorVersion = formatVersion(hv)
	capsXML, err := l.ConnectGetCapabilities()
	if err != nil {
		return info, fmt.Errorf("capabilities: %w", err)
	}
	arch, types, err := ParseDomainTypes(capsXML)
	if err != nil {
		return info, err
	}
	info.HostArch, info.DomainTypes = arch, types
	info.KVMOffered = slices.Contains(types, VirtTypeKVM)
	return info, nil
}

// ParseDomainTypes returns the host architecture and the sorted domain types
// (kvm, qemu, ...) libvirt's capabilities XML offers for guests of that arch.
func ParseDomainTypes(capsXML string) (arch string, types []string, err error) {
	var caps libvirtxml.Caps
	if err := caps.Unmarshal(capsXML); err != nil {
		return "", nil, fmt.Errorf("parse libvirt capabilities: %w", err)
	}
	if caps.Host.CPU != nil {
		arch = caps.Host.CPU.Arch
	}
	for _, g := range caps.Guests {
		if arch != "" && g.Arch.Name != arch {
			continue
		}
		for _, d := range g.Arch.Domains {
			if !slices.Contains(types, d.Type) {
				types = append(types, d.Type)
			}
		}
	}
	slices.Sort(types)
	if len(types) == 0 {
		return arch, nil, errors.New("libvirt capabilities offer no guest domain type for the host arch")
	}
	return arch, types, nil
}

// formatVersion turns libvirt's major*1e6+minor*1e3+release into "M.m.r".
func formatVersion(v uint64) string {
	return fmt.Sprintf("%d.%d.%d", v/1000000, v/1000%1000, v%1000)
}

// IsInstanceDomain says whether a libvirt domain is a Nova instance (Nova names them
// instance-XXXXXXXX by default).
func IsInstanceDomain(name string) bool { return strings.HasPrefix(name, "instance-") }

// DestroyInstances stops and undefines Nova's guests in the libvirt at socket (osd reset)
// and returns how many.
func DestroyInstances(ctx context.Context, socket string) (int, error) {
	l, err := Connect(ctx, socket)
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
		if !IsInstanceDomain(d.Name) {
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

// IsOSDSecret says whether a libvirt secret is one nova-compute's libvirt-secret step
// defines for a Ceph client (charts/nova: usage name "client.cinder (osd)"): osd reset
// removes those only.
func IsOSDSecret(usageID string) bool { return strings.HasSuffix(usageID, " (osd)") }

// RemoveOSDSecrets undefines osd's Ceph secrets in the libvirt at socket (they outlive the
// nova-compute pod: libvirt keeps them under /etc/libvirt/secrets) and returns how many.
func RemoveOSDSecrets(ctx context.Context, socket string) (int, error) {
	l, err := Connect(ctx, socket)
	if err != nil {
		return 0, err
	}
	defer l.Disconnect()
	secrets, _, err := l.ConnectListAllSecrets(1, 0)
	if err != nil {
		return 0, fmt.Errorf("list libvirt secrets: %w", err)
	}
	n := 0
	for _, s := range secrets {
		if !IsOSDSecret(s.UsageID) {
			continue
		}
		if err := l.SecretUndefine(s); err != nil {
			return n, fmt.Errorf("undefine libvirt secret %s: %w", s.UsageID, err)
		}
		n++
	}
	return n, nil
}
