package netsetup

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/osdcloud/osd/netsetup/ovsdb"
	"github.com/vishvananda/netlink"
)

// Datapath types of OVS bridges.
const (
	DatapathSystem = "system" // kernel datapath (openvswitch.ko)
	DatapathNetdev = "netdev" // userspace datapath
)

// OVSConfig says where one Open vSwitch instance keeps its files and how it forwards.
// The host instance uses DefaultOVSConfig; tests run a private instance with all
// three directories under t.TempDir() and NetNS set to a namespace of their own.
type OVSConfig struct {
	RunDir   string // db.sock, pidfiles, unixctl sockets
	DBDir    string // conf.db
	LogDir   string // ovsdb-server.log, ovs-vswitchd.log
	Datapath string // DatapathSystem or DatapathNetdev; "" = DetectDatapath()
	SystemID string // external_ids:system-id; "" or "random" = a random UUID, kept once set
	// NetNS, if set, is the path of a network namespace (e.g. /run/netns/x) the
	// daemons are started in; "" starts them in the caller's namespace.
	NetNS string
	// SchemaPath is the vswitch schema; "" = /usr/share/openvswitch/vswitch.ovsschema.
	SchemaPath string
}

// DefaultOVSConfig returns the host instance's configuration, using the same paths as
// Debian's openvswitch-switch so that other consumers (ovn-controller in a pod) can
// share the socket, and the datapath detected on this host.
func DefaultOVSConfig() OVSConfig {
	return OVSConfig{
		RunDir:   "/var/run/openvswitch",
		DBDir:    "/etc/openvswitch",
		LogDir:   "/var/log/openvswitch",
		Datapath: DetectDatapath(),
	}
}

// Socket returns the path of the ovsdb-server unix socket.
func (c OVSConfig) Socket() string { return filepath.Join(c.RunDir, "db.sock") }

func (c OVSConfig) dbPath() string { return filepath.Join(c.DBDir, "conf.db") }

func (c OVSConfig) pidfile(daemon string) string { return filepath.Join(c.RunDir, daemon+".pid") }

func (c OVSConfig) schema() string {
	if c.SchemaPath != "" {
		return c.SchemaPath
	}
	return "/usr/share/openvswitch/vswitch.ovsschema"
}

func (c OVSConfig) datapath() string {
	if c.Datapath != "" {
		return c.Datapath
	}
	return DetectDatapath()
}

// ChooseDatapath is the pure datapath decision: the kernel datapath when the
// openvswitch module is loaded or installed, else the userspace one.
func ChooseDatapath(moduleLoaded, moduleInstalled bool) string {
	if moduleLoaded || moduleInstalled {
		return DatapathSystem
	}
	return DatapathNetdev
}

// DetectDatapath probes this host for the openvswitch kernel module.
func DetectDatapath() string {
	_, err := os.Stat("/sys/module/openvswitch")
	loaded := err == nil
	installed := false
	var uts syscall.Utsname
	if syscall.Uname(&uts) == nil {
		release := utsString(uts.Release[:])
		if f, err := os.Open(filepath.Join("/lib/modules", release, "modules.dep")); err == nil {
			sc := bufio.NewScanner(f)
			sc.Buffer(make([]byte, 64*1024), 1024*1024)
			for sc.Scan() {
				mod, _, _ := strings.Cut(sc.Text(), ":")
				if base := filepath.Base(mod); strings.HasPrefix(base, "openvswitch.ko") {
					installed = true
					break
				}
			}
			f.Close()
		}
	}
	return ChooseDatapath(loaded, installed)
}

func utsString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}

// EnsureOVS makes the OVS instance described by c run: it creates the database with
// ovsdb-tool if missing (or converts it to the installed schema), starts ovsdb-server
// if the socket does not answer, creates the root row, sets system-id and, for the
// netdev datapath, other_config:userspace-tso-enable=true, and only then starts
// ovs-vswitchd (without --mlockall, i.e. what ovs-ctl --no-mlockall does) if it is not running. If the TSO setting had to be
// changed under a running ovs-vswitchd, it restarts ovs-vswitchd, because the setting
// only takes effect at start. It reports whether it changed anything.
func EnsureOVS(ctx context.Context, c OVSConfig) (bool, error) {
	changed := false
	for _, d := range []string{c.RunDir, c.DBDir, c.LogDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return false, fmt.Errorf("create %s: %w", d, err)
		}
	}
	o, err := tryConnect(ctx, c.Socket())
	if err != nil {
		if err := ensureDB(ctx, c); err != nil {
			return false, err
		}
		if err := startOVSDBServer(ctx, c); err != nil {
			return false, err
		}
		changed = true
		if o, err = waitConnect(ctx, c.Socket()); err != nil {
			return changed, err
		}
	}
	defer o.Close()

	ch, err := o.EnsureRoot(ctx)
	if err != nil {
		return changed, err
	}
	changed = changed || ch
	ids, err := o.ExternalIDs(ctx)
	if err != nil {
		return changed, err
	}
	if ids["system-id"] == "" || (c.SystemID != "" && c.SystemID != "random" && ids["system-id"] != c.SystemID) {
		id := c.SystemID
		if id == "" || id == "random" {
			if id, err = randomUUID(); err != nil {
				return changed, err
			}
		}
		if _, err := o.SetExternalIDs(ctx, map[string]string{"system-id": id}); err != nil {
			return changed, err
		}
		changed = true
	}
	tso := ""
	if c.datapath() == DatapathNetdev {
		tso = "true"
	}
	tsoChanged, err := o.SetOtherConfig(ctx, map[string]string{"userspace-tso-enable": tso})
	if err != nil {
		return changed, err
	}
	changed = changed || tsoChanged

	running := daemonRunning(c.pidfile("ovs-vswitchd"), "ovs-vswitchd")
	if running && tsoChanged {
		slog.Info("restarting ovs-vswitchd for userspace-tso-enable", "rundir", c.RunDir)
		if err := stopDaemon(ctx, c.pidfile("ovs-vswitchd"), "ovs-vswitchd"); err != nil {
			return changed, err
		}
		running = false
	}
	if !running {
		if err := startVSwitchd(ctx, c); err != nil {
			return changed, err
		}
		changed = true
	}
	return changed, nil
}

// StopOVS stops ovs-vswitchd, then ovsdb-server, of the instance described by c
// (found through their pidfiles). Stopping a stopped instance is not an error.
func StopOVS(ctx context.Context, c OVSConfig) error {
	if err := stopDaemon(ctx, c.pidfile("ovs-vswitchd"), "ovs-vswitchd"); err != nil {
		return err
	}
	if err := removeNetdevTap(c.NetNS); err != nil {
		return err
	}
	return stopDaemon(ctx, c.pidfile("ovsdb-server"), "ovsdb-server")
}

// netdevTap is the tap device ovs-vswitchd's userspace datapath creates (persistent) for
// its first netdev bridge; it outlives the daemon.
const netdevTap = "ovs-netdev"

// removeNetdevTap deletes the userspace datapath's tap in the namespace at nsPath once
// ovs-vswitchd no longer runs, so that a stopped Open vSwitch leaves no link behind
// (nothing when there is none, or when it is not a tun/tap device).
func removeNetdevTap(nsPath string) error {
	h, err := netlinkHandle(nsPath)
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(netdevTap)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return fmt.Errorf("look up %s: %w", netdevTap, err)
	}
	if l.Type() != "tuntap" {
		return nil
	}
	if err := h.LinkDel(l); err != nil {
		return fmt.Errorf("delete %s (the userspace datapath's tap): %w", netdevTap, err)
	}
	slog.Info("deleted " + netdevTap + " (the userspace datapath's tap)")
	return nil
}

// ConnectOVS connects to the ovsdb-server of c.
func ConnectOVS(ctx context.Context, c OVSConfig) (*ovsdb.OVS, error) {
	return ovsdb.Connect(ctx, c.Socket())
}

func tryConnect(ctx context.Context, sock string) (*ovsdb.OVS, error) {
	if _, err := os.Stat(sock); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return ovsdb.Connect(ctx, sock)
}

func waitConnect(ctx context.Context, sock string) (*ovsdb.OVS, error) {
	deadline := time.Now().Add(15 * time.Second)
	for {
		o, err := tryConnect(ctx, sock)
		if err == nil {
			return o, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("ovsdb-server at %s does not answer: %w", sock, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ensureDB(ctx context.Context, c OVSConfig) error {
	db := c.dbPath()
	if _, err := os.Stat(db); errors.Is(err, os.ErrNotExist) {
		return runTool(ctx, c, "ovsdb-tool", "create", db, c.schema())
	}
	out, err := exec.CommandContext(ctx, "ovsdb-tool", "needs-conversion", db, c.schema()).Output()
	if err != nil {
		return fmt.Errorf("ovsdb-tool needs-conversion %s: %w", db, err)
	}
	if strings.TrimSpace(string(out)) == "yes" {
		return runTool(ctx, c, "ovsdb-tool", "convert", db, c.schema())
	}
	return nil
}

func (c OVSConfig) env() []string {
	return append(os.Environ(), "OVS_RUNDIR="+c.RunDir, "OVS_LOGDIR="+c.LogDir, "OVS_DBDIR="+c.DBDir)
}

func runTool(ctx context.Context, c OVSConfig, name string, args ...string) error {
	var out []byte
	err := inNetNS(c.NetNS, func() error {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = c.env()
		var err error
		out, err = cmd.CombinedOutput()
		return err
	})
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func startOVSDBServer(ctx context.Context, c OVSConfig) error {
	start := time.Now()
	err := runTool(ctx, c, "ovsdb-server", c.dbPath(),
		"--remote=punix:"+c.Socket(),
		"--remote=db:Open_vSwitch,Open_vSwitch,manager_options",
		"--pidfile="+c.pidfile("ovsdb-server"),
		"--log-file="+filepath.Join(c.LogDir, "ovsdb-server.log"),
		"--detach", "--no-chdir")
	if err == nil {
		slog.Info("started ovsdb-server", "rundir", c.RunDir, "took", time.Since(start))
	}
	return err
}

func startVSwitchd(ctx context.Context, c OVSConfig) error {
	start := time.Now()
	err := runTool(ctx, c, "ovs-vswitchd", "unix:"+c.Socket(),
		"--pidfile="+c.pidfile("ovs-vswitchd"),
		"--log-file="+filepath.Join(c.LogDir, "ovs-vswitchd.log"),
		// No --mlockall: ovs-vswitchd locks its memory only when asked (ovs-ctl's
		// default, which --no-mlockall turns off); unlocked it needs ~21 MiB, not ~90.
		"--detach", "--no-chdir")
	if err == nil {
		slog.Info("started ovs-vswitchd", "rundir", c.RunDir, "took", time.Since(start))
	}
	return err
}

// daemonPID returns the pid in pidfile if that process is alive and is comm.
func daemonPID(pidfile, comm string) int {
	b, err := os.ReadFile(pidfile)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	name, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil || !strings.HasPrefix(comm, strings.TrimSpace(string(name))) {
		return 0
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err == nil {
		// A zombie (state Z) has exited already.
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			return 0
		}
	}
	return pid
}

func daemonRunning(pidfile, comm string) bool { return daemonPID(pidfile, comm) != 0 }

func stopDaemon(ctx context.Context, pidfile, comm string) error {
	pid := daemonPID(pidfile, comm)
	if pid == 0 {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop %s (pid %d): %w", comm, pid, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for daemonPID(pidfile, comm) == pid {
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			time.Sleep(100 * time.Millisecond)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	slog.Info("stopped "+comm, "pid", pid)
	return nil
}

func randomUUID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random system-id: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}
