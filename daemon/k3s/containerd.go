package k3s

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
)

// Containerd is the containerd child process osd supervises. osd runs it itself (rather
// than letting k3s do it) so that a daemon stop can end workloads and containerd in order.
type Containerd struct {
	cfg    Config
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// StartContainerd starts the osd executable self as containerd with c's configuration and
// waits until it answers, at most timeout. Its output goes to log.
func StartContainerd(ctx context.Context, c Config, self string, log io.Writer, timeout time.Duration) (*Containerd, error) {
	c = c.WithDefaults()
	os.Remove(c.ContainerdSocket())
	cmd := &exec.Cmd{
		Path:   self,
		Args:   []string{"containerd", "--config", c.ContainerdConfig()},
		Env:    toolEnv(c),
		Stdout: log,
		Stderr: log,
		// containerd dies with the daemon; the shims (and so the workloads) survive a crash
		// and are picked up again when the daemon comes back.
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true},
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start containerd: %w", err)
	}
	d := &Containerd{cfg: c, cmd: cmd, exited: make(chan struct{})}
	go func() {
		d.err = cmd.Wait()
		close(d.exited)
	}()
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		cl, err := containerd.New(c.ContainerdSocket(), containerd.WithTimeout(time.Second))
		if err == nil {
			_, verr := cl.Version(wctx)
			cl.Close()
			if verr == nil {
				return d, nil
			}
		}
		select {
		case <-d.exited:
			return nil, fmt.Errorf("containerd exited at start (%v); see %s/containerd.log", d.err, c.LogDir())
		case <-wctx.Done():
			d.kill()
			return nil, fmt.Errorf("containerd did not answer on %s within %s", c.ContainerdSocket(), timeout)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// toolEnv is the environment for containerd and the tools: the bin dir first on PATH so
// osd's own multicall binary is found before any host containerd.
func toolEnv(c Config) []string {
	env := []string{}
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "PATH=") && !strings.HasPrefix(e, "NOTIFY_SOCKET=") {
			env = append(env, e)
		}
	}
	env = append(env, "PATH="+c.BinDir()+":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	if os.Getenv("GOGC") == "" {
		env = append(env, "GOGC="+strconv.Itoa(BusyGCPercent)) // set once: containerd imports the images
	}
	return env
}

// ToolEnv is the environment variables that point kubectl, ctr and crictl at osd's cluster.
func ToolEnv(p Paths) map[string]string {
	return map[string]string{
		"KUBECONFIG":                 p.Kubeconfig(),
		"CONTAINERD_ADDRESS":         p.ContainerdSocket(),
		"CONTAINERD_NAMESPACE":       "k8s.io",
		"CONTAINER_RUNTIME_ENDPOINT": "unix://" + p.ContainerdSocket(),
		"IMAGE_SERVICE_ENDPOINT":     "unix://" + p.ContainerdSocket(),
		"CRI_CONFIG_FILE":            p.CrictlConfig(),
	}
}

// Exited is closed when containerd has exited.
func (d *Containerd) Exited() <-chan struct{} { return d.exited }

// Stop ends containerd with SIGTERM (SIGKILL after 10s). Unless keepWorkloads, it then
// kills what containerd leaves running (shims and the pods' processes): with containerd
// down first, the kubelet cannot restart them meanwhile. Pods are recreated by the kubelet
// when the daemon starts again.
func (d *Containerd) Stop(ctx context.Context, keepWorkloads bool) error {
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		slog.Warn("containerd did not stop within 10s; killing it")
		d.kill()
		<-d.exited
	}
	if !keepWorkloads {
		if n := killLeftovers(d.cfg.Paths); n > 0 {
			slog.Info("stopped workloads", "processes", n)
		}
	}
	return nil
}

func (d *Containerd) kill() { d.cmd.Process.Kill() }
