package preflight

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/osdcloud/osd/hypervisor"
)

// ProbeConfig says what to probe and how to recognise osd itself. Zero values
// take the defaults noted; the *Root and path fields exist for tests.
type ProbeConfig struct {
	StateDir string   // osd's state dir; free disk is measured on its filesystem
	Ports    []int    // TCP ports to check (nil: DefaultPorts)
	Packages []string // Debian packages to check (nil: DefaultPackages + DefaultOptionalPackages)
	// SelfPIDs and SelfExe identify osd's own processes (default: this
	// process and its executable). Those, and any process whose executable
	// lies under StateDir, hold ports legitimately and are no conflict.
	SelfPIDs []int
	SelfExe  string

	ProcRoot   string // default /proc
	SysRoot    string // default /sys
	DevRoot    string // default /dev
	RunDir     string // default /run
	DpkgStatus string // default /var/lib/dpkg/status
	ModulesDir string // default /lib/modules/<kernel release>
	// ResolveTimeout bounds the hostname lookup (default 3 s).
	ResolveTimeout time.Duration
}

func (c ProbeConfig) withDefaults() ProbeConfig {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&c.ProcRoot, "/proc")
	def(&c.SysRoot, "/sys")
	def(&c.DevRoot, "/dev")
	def(&c.RunDir, "/run")
	def(&c.DpkgStatus, "/var/lib/dpkg/status")
	if c.Ports == nil {
		c.Ports = DefaultPorts()
	}
	if c.Packages == nil {
		c.Packages = append(DefaultPackages(), DefaultOptionalPackages()...)
	}
	if c.SelfPIDs == nil {
		c.SelfPIDs = []int{os.Getpid()}
	}
	if c.SelfExe == "" {
		c.SelfExe, _ = os.Executable()
	}
	if c.ResolveTimeout == 0 {
		c.ResolveTimeout = 3 * time.Second
	}
	return c
}

// Probe reads the host's facts. It reads /proc, /sys, /dev and dpkg's status
// and changes nothing. Facts it cannot read stay zero; the error (joined)
// names the reads that failed.
func Probe(ctx context.Context, cfg ProbeConfig) (Facts, error) {
	cfg = cfg.withDefaults()
	var f Facts
	var errs []error
	note := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}

	f.CPUs = runtime.NumCPU()
	mem, err := memTotal(filepath.Join(cfg.ProcRoot, "meminfo"))
	f.MemoryBytes = mem
	note(err)
	f.DiskPath, f.DiskFreeBytes, err = diskFree(cfg.StateDir)
	note(err)

	f.Kernel = readTrim(filepath.Join(cfg.ProcRoot, "sys/kernel/osrelease"))
	f.IsRoot = os.Geteuid() == 0
	f.Systemd = exists(filepath.Join(cfg.RunDir, "systemd/system"))
	f.CgroupVersion = cgroupVersion(filepath.Join(cfg.SysRoot, "fs/cgroup"))

	cpuinfo, err := os.ReadFile(filepath.Join(cfg.ProcRoot, "cpuinfo"))
	note(err)
	f.CPUVMX, f.CPUSVM = hypervisor.ParseCPUFlags(string(cpuinfo))
	probeKVM(&f, filepath.Join(cfg.DevRoot, "kvm"))

	modDir := cfg.ModulesDir
	if modDir == "" && f.Kernel != "" {
		modDir = filepath.Join("/lib/modules", f.Kernel)
	}
	mods := readModules(modDir)
	f.OVSModuleState = moduleState(cfg, mods, "openvswitch", "openvswitch.ko", "")
	f.OVSKernelModule = f.OVSModuleState != "absent"
	f.DeviceMapperState = moduleState(cfg, mods, "dm_mod", "dm-mod.ko", "device-mapper")
	f.DeviceMapper = f.DeviceMapperState != "absent"
	probeISCSI(&f, cfg, mods)

	procs, err := scanProcesses(cfg)
	note(err)
	f.RunningConflicts = conflicts(procs, cfg)
	f.Ports, f.SelfPorts, err = probePorts(cfg, procs)
	note(err)

	f.Packages, err = dpkgInstalled(cfg.DpkgStatus, cfg.Packages)
	note(err)

	f.Hostname = readTrim(filepath.Join(cfg.ProcRoot, "sys/kernel/hostname"))
	if f.Hostname == "" {
		f.Hostname, _ = os.Hostname()
	}
	if f.Hostname != "" {
		rctx, cancel := context.WithTimeout(ctx, cfg.ResolveTimeout)
		addrs, err := net.DefaultResolver.LookupHost(rctx, f.Hostname)
		cancel()
		f.HostnameResolves = err == nil && len(addrs) > 0
		f.HostnameAddresses = addrs
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return f, fmt.Errorf("probe host: %w", errors.Join(errs...))
	}
	return f, nil
}

func readTrim(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func memTotal(path string) (int64, error) {
	file, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("read memory size: %w", err)
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse MemTotal: %w", err)
			}
			return kb * kib, nil
		}
	}
	return 0, fmt.Errorf("no MemTotal in %s", path)
}

// diskFree measures the filesystem of dir, or of its nearest existing parent
// when dir does not exist yet.
func diskFree(dir string) (string, int64, error) {
	if dir == "" {
		dir = "/"
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", 0, err
	}
	for {
		var st unix.Statfs_t
		err := unix.Statfs(dir, &st)
		if err == nil {
			return dir, int64(st.Bavail) * st.Bsize, nil
		}
		if !errors.Is(err, unix.ENOENT) || dir == "/" {
			return dir, 0, fmt.Errorf("statfs %s: %w", dir, err)
		}
		dir = filepath.Dir(dir)
	}
}

func probeKVM(f *Facts, path string) {
	fi, err := os.Stat(path)
	if err != nil || fi.Mode()&fs.ModeCharDevice == 0 {
		return
	}
	f.KVMDevice = true
	f.KVMDeviceMode = uint32(fi.Mode().Perm())
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		gid := strconv.FormatUint(uint64(st.Gid), 10)
		f.KVMDeviceGroup = gid
		if g, err := user.LookupGroupId(gid); err == nil {
			f.KVMDeviceGroup = g.Name
		}
	}
}

// cgroupVersion tells v2 (unified), hybrid (v1 controllers plus cgroup2 at
// unified/) or v1 from the filesystem types mounted at root.
func cgroupVersion(root string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return ""
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return "v2"
	}
	if st.Type != unix.TMPFS_MAGIC {
		return ""
	}
	if err := unix.Statfs(filepath.Join(root, "unified"), &st); err == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		return "hybrid"
	}
	return "v1"
}
