package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/osdcloud/osd/bootstrap/fsutil"
	"github.com/osdcloud/osd/daemon/client"
)

// The daemon as a service: `osd daemon start|stop|restart` run it through its systemd unit
// when one is installed for this state dir (osd.service of the .deb, or the unit the snap
// names in OSD_SERVICE_UNIT), otherwise as a detached process. Package upgrades run
// `osd daemon restart --if-running --keep-workloads --backup-state`.

// backupSuffix names the copy of the state database taken while the daemon is stopped.
const backupSuffix = ".pre-upgrade"

func newDaemonStartCmd(g *globals) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Start the osd daemon (through its systemd unit when installed) and wait until its API answers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if os.Geteuid() != 0 {
				return errNeedRoot("osd daemon start")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return startService(ctx, g, os.Stdout)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "give up waiting for the API after this long")
	return cmd
}

func newDaemonStopCmd(g *globals) *cobra.Command {
	var o stopOptions
	cmd := &cobra.Command{
		Use:   "stop",
		Short: "Stop the osd daemon, and the pods it runs unless --keep-workloads",
		Long: "Stop the osd daemon. Its stop ends containerd and then the pods' processes; with\n" +
			"--keep-workloads the pods keep running (the guests in libvirt always do) and the next\n" +
			"daemon finds them where this one left them: what a package upgrade does.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if os.Geteuid() != 0 {
				return errNeedRoot("osd daemon stop")
			}
			_, err := stopService(g, o, os.Stdout)
			return err
		},
	}
	o.flags(cmd)
	return cmd
}

func newDaemonRestartCmd(g *globals) *cobra.Command {
	var o stopOptions
	var ifRunning bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "restart",
		Short: "Stop the osd daemon and start it again (what a package upgrade runs, with --keep-workloads)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if os.Geteuid() != 0 {
				return errNeedRoot("osd daemon restart")
			}
			stopped, err := stopService(g, o, os.Stdout)
			if err != nil {
				return err
			}
			if !stopped && ifRunning {
				return nil
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return startService(ctx, g, os.Stdout)
		},
	}
	o.flags(cmd)
	cmd.Flags().BoolVar(&ifRunning, "if-running", false, "do nothing when no daemon runs")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "give up waiting for the new daemon's API after this long")
	return cmd
}

type stopOptions struct {
	keepWorkloads bool
	backupState   bool
}

func (o *stopOptions) flags(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&o.keepWorkloads, "keep-workloads", false, "leave the pods running (the next daemon adopts them)")
	cmd.Flags().BoolVar(&o.backupState, "backup-state", false, "once stopped, copy the state database to STATE-DIR/osd.db"+backupSuffix)
}

// stopService stops the daemon of g's state dir and reports whether one was running.
func stopService(g *globals, o stopOptions, out io.Writer) (bool, error) {
	pid, running := client.LockHolder(g.stateDir)
	if running {
		if o.keepWorkloads {
			if err := client.RequestKeepWorkloads(g.runDir); err != nil {
				return true, err
			}
			defer client.CancelKeepWorkloads(g.runDir)
		}
		if err := stopDaemon(g); err != nil {
			return true, err
		}
		if o.keepWorkloads {
			fmt.Fprintf(out, "stopped the osd daemon (pid %d); its workloads keep running\n", pid)
		} else {
			fmt.Fprintf(out, "stopped the osd daemon (pid %d) and its workloads\n", pid)
		}
	} else {
		fmt.Fprintln(out, "the osd daemon is not running")
	}
	if o.backupState {
		dst, err := backupState(g.stateDir)
		if err != nil {
			return running, err
		}
		if dst != "" {
			fmt.Fprintf(out, "state database backed up to %s\n", dst)
		}
	}
	return running, nil
}

// startService starts the daemon unless its API answers and waits until it does.
func startService(ctx context.Context, g *globals, out io.Writer) error {
	c := g.client()
	if err := ensureDaemon(ctx, g, c); err != nil {
		return fmt.Errorf("%w%s", err, daemonLogHint(g))
	}
	info, err := c.ServerInfo(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "the osd daemon is running (version %s)\n", info.Version)
	return nil
}

// backupState copies the state database (and its write-ahead log, when the last daemon
// did not end cleanly) next to itself; the daemon must be stopped. It returns the copy's
// path, or "" when there is no database yet.
func backupState(stateDir string) (string, error) {
	if pid, held := client.LockHolder(stateDir); held {
		return "", fmt.Errorf("back up the state database: the osd daemon (pid %d) still runs", pid)
	}
	db := filepath.Join(stateDir, "osd.db")
	if _, err := os.Stat(db); errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	dst := db + backupSuffix
	os.Remove(dst + "-wal")
	for _, ext := range []string{"", "-wal"} {
		if err := fsutil.CopyFile(db+ext, dst+ext, 0o600); err != nil && !(ext != "" && errors.Is(err, os.ErrNotExist)) {
			return "", fmt.Errorf("back up the state database: %w", err)
		}
	}
	return dst, nil
}

// serviceUnit is the systemd unit that runs the daemon of g's state dir, if systemd runs
// this host and the unit is installed: the one OSD_SERVICE_UNIT names, else osd.service
// for the default state dir.
func serviceUnit(g *globals) (string, bool) {
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		return "", false
	}
	unit := os.Getenv("OSD_SERVICE_UNIT")
	if unit == "" {
		if g.stateDir != client.DefaultStateDir {
			return "", false
		}
		unit = "osd.service"
	}
	out, err := exec.Command("systemctl", "show", "--property=LoadState", "--value", unit).Output()
	if err != nil || strings.TrimSpace(string(out)) != "loaded" {
		return "", false
	}
	return unit, true
}

// startDaemon starts the daemon: through systemd when a unit runs it, else as a detached
// process of its own session, logging to STATE/logs/daemon.log.
func startDaemon(g *globals) (ended func() error, err error) {
	if unit, ok := serviceUnit(g); ok {
		if out, err := exec.Command("systemctl", "start", unit).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("systemctl start %s: %w: %s", unit, err, strings.TrimSpace(string(out)))
		}
		return func() error { return unitEnded(unit) }, nil
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	logDir := filepath.Join(g.stateDir, "logs")
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(filepath.Join(logDir, "daemon.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	args := []string{"daemon", "--state-dir", g.stateDir, "--run-dir", g.runDir}
	if g.socket != "" {
		args = append(args, "--socket", g.socket)
	}
	closeInheritedFiles()
	return startDetached(logf, self, args...)
}

// startDetached starts name in a session of its own with its output in logf, and returns
// a function that reports, without blocking, how the process ended (nil while it runs).
// The process is waited for here, so it leaves no zombie behind while this command runs,
// and it outlives this command.
func startDetached(logf *os.File, name string, args ...string) (ended func() error, err error) {
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start osd daemon: %w", err)
	}
	pid := cmd.Process.Pid
	done := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		if err == nil {
			err = errors.New("exit status 0")
		}
		done <- fmt.Errorf("pid %d: %w", pid, err)
	}()
	var end error
	return func() error {
		if end == nil {
			select {
			case end = <-done:
			default:
			}
		}
		return end
	}, nil
}

// unitEnded reports a systemd unit that is no longer active (nil while it starts or runs).
func unitEnded(unit string) error {
	out, err := exec.Command("systemctl", "show", "--property=ActiveState", "--value", unit).Output()
	if err != nil {
		return nil // systemd did not answer: no sign that the unit ended
	}
	switch state := strings.TrimSpace(string(out)); state {
	case "inactive", "failed", "deactivating":
		return fmt.Errorf("unit %s is %s", unit, state)
	}
	return nil
}

// processEnded reports whether process pid no longer runs: it is gone, or it exited and
// waits to be reaped by its parent (a zombie holds no lock, socket or port).
func processEnded(pid int) bool {
	if pid <= 0 {
		return true // no process to wait for (kill(0) would test this process group)
	}
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// The state follows the command name, which is in parentheses and may hold any byte.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z' || s[i+2] == 'X'
	}
	return false
}

// closeInheritedFiles keeps the descriptors this process inherited (from a package
// manager running a maintainer script: its locks and status pipes) out of the detached
// daemon, which outlives it.
func closeInheritedFiles() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}

// stopDaemon stops a running daemon: through systemd when a unit runs it, else by SIGTERM
// to the lock holder, escalating to SIGKILL after five minutes; it returns once the
// process has ended.
func stopDaemon(g *globals) error {
	if unit, ok := serviceUnit(g); ok {
		if exec.Command("systemctl", "is-active", "--quiet", unit).Run() == nil {
			if out, err := exec.Command("systemctl", "stop", unit).CombinedOutput(); err != nil {
				return fmt.Errorf("systemctl stop %s: %w: %s", unit, err, strings.TrimSpace(string(out)))
			}
		}
	}
	pid, held := client.LockHolder(g.stateDir)
	if !held {
		return nil
	}
	if pid <= 0 {
		// The lock file names no process (its holder is releasing it): signal nobody
		// (kill(0) would signal this command's own process group), wait for the release.
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if _, held := client.LockHolder(g.stateDir); !held {
				return nil
			}
		}
		return fmt.Errorf("the osd daemon's lock %s is held but names no process: stop the osd daemon by hand", filepath.Join(g.stateDir, client.DaemonLockFile))
	}
	fmt.Printf("stopping osd daemon (pid %d)\n", pid)
	syscall.Kill(pid, syscall.SIGTERM)
	// The daemon releases its lock before it stops the embedded Kubernetes (whose parts end
	// the process): a daemon started before the process ended would find k3s's ports taken.
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		if _, held := client.LockHolder(g.stateDir); !held && processEnded(pid) {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	fmt.Printf("osd daemon did not stop in 5 minutes; killing it\n")
	syscall.Kill(pid, syscall.SIGKILL)
	time.Sleep(time.Second)
	return nil
}

// daemonLogHint points at where a daemon that failed to start said why: the journal under
// systemd, else the last lines of its log.
func daemonLogHint(g *globals) string {
	if unit, ok := serviceUnit(g); ok {
		return fmt.Sprintf("\nsee journalctl -u %s", unit)
	}
	b, err := os.ReadFile(filepath.Join(g.stateDir, "logs", "daemon.log"))
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return "\nlast lines of " + filepath.Join(g.stateDir, "logs", "daemon.log") + ":\n  " + strings.Join(lines, "\n  ")
}
