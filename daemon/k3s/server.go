package k3s

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/osdcloud/osd/bootstrap/fsutil"

	k3sagent "github.com/k3s-io/k3s/pkg/cli/agent"
	"github.com/k3s-io/k3s/pkg/cli/cmds"
	k3sserver "github.com/k3s-io/k3s/pkg/cli/server"
	"github.com/rancher/wrangler/v3/pkg/signals"
	"github.com/urfave/cli/v2"
)

// ErrAlreadyStarted is returned when a second embedded k3s is started in one process:
// k3s keeps global state and installs process-wide signal handlers, so it runs once.
var ErrAlreadyStarted = errors.New("the embedded k3s already ran in this process")

var startOnce sync.Mutex
var started bool

// Server is a running embedded k3s: a server (with its agent) or an agent alone.
type Server struct {
	done chan struct{}
	err  error
}

// Prepare writes the files k3s and containerd read at start: the containerd configuration,
// the RBAC manifests, the directories, and the multicall tool links in the bin dir.
// self is the path of the osd executable.
func Prepare(c Config, self string) error {
	c = c.WithDefaults()
	for _, d := range []string{c.StateDir, c.DataDir(), c.BinDir(), c.LogDir(), c.ManifestsDir(), c.ContainerdDir(), c.ContainerdState(), c.CNIConfDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("prepare %s: %w", d, err)
		}
	}
	if err := fsutil.WriteFileAtomic(c.ContainerdConfig(), []byte(ContainerdConfig(c)), 0o600); err != nil {
		return fmt.Errorf("write containerd config: %w", err)
	}
	crictl := fmt.Sprintf("runtime-endpoint: unix://%s\nimage-endpoint: unix://%s\ntimeout: 10\n", c.ContainerdSocket(), c.ContainerdSocket())
	if err := fsutil.WriteFileAtomic(c.CrictlConfig(), []byte(crictl), 0o600); err != nil {
		return fmt.Errorf("write crictl config: %w", err)
	}
	rbac, err := RBACManifest(c.NodeName)
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(c.ManifestsDir()+"/osd-rbac.yaml", rbac, 0o600); err != nil {
		return fmt.Errorf("write rbac manifest: %w", err)
	}
	if err := EnsureCgroupRoot(c.CgroupRoot); err != nil {
		return err
	}
	return linkTools(c.BinDir(), self)
}

// linkTools makes bin/containerd, bin/kubectl, ... symlinks to the osd executable.
func linkTools(binDir, self string) error {
	for _, t := range Tools {
		p := binDir + "/" + t
		if cur, err := os.Readlink(p); err == nil && cur == self {
			continue
		}
		if err := fsutil.Symlink(self, p); err != nil {
			return fmt.Errorf("link %s: %w", t, err)
		}
	}
	return nil
}

// StartServer runs the k3s server and agent in this process. containerd must already be
// answering on c.ContainerdSocket(). The server runs until Stop, which ends the process:
// stop everything else first. Signals do not reach k3s (see detachSignals).
func StartServer(c Config) (*Server, error) {
	args, err := ServerArgs(c)
	if err != nil {
		return nil, err
	}
	return start(cmds.NewServerCommand(k3sserver.Run), args)
}

// StartAgent runs a k3s agent (kubelet, kube-proxy, the supervisor client) in this
// process, joining the server at serverURL with the node token. Like StartServer: once
// per process, containerd first, Stop last.
func StartAgent(c Config, serverURL, token string) (*Server, error) {
	args, err := AgentArgs(c, serverURL, token)
	if err != nil {
		return nil, err
	}
	return start(cmds.NewAgentCommand(k3sagent.Run), args)
}

func start(cmd *cli.Command, args []string) (*Server, error) {
	startOnce.Lock()
	defer startOnce.Unlock()
	if started {
		return nil, ErrAlreadyStarted
	}
	started = true
	app := cmds.NewApp()
	app.DisableSliceFlagSeparator = true
	app.Commands = []*cli.Command{cmd}
	s := &Server{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		err := app.Run(append([]string{"k3s"}, args...))
		if err != nil && !errors.Is(err, context.Canceled) {
			s.err = fmt.Errorf("embedded k3s %s: %w", args[0], err)
		}
	}()
	if !detachSignals(30*time.Second, s.done) {
		select {
		case <-s.done:
			return s, fmt.Errorf("embedded k3s %s ended at start: %v", args[0], s.err)
		default:
		}
		return s, errors.New("embedded k3s did not set up its signal handling within 30s")
	}
	return s, nil
}

// Done is closed when the server has returned.
func (s *Server) Done() <-chan struct{} { return s.done }

// Err is the server's error once Done is closed (nil for a requested stop).
func (s *Server) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Stop asks k3s to shut down and waits, at most timeout. The embedded components exit
// the process when they stop, so Stop may not return: call it last.
func (s *Server) Stop(timeout time.Duration) error {
	deadline := time.After(timeout)
	asked := false
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		// k3s exits the process on a second request: ask exactly once.
		if !asked {
			asked = signals.RequestShutdown()
		}
		select {
		case <-s.done:
			return s.err
		case <-deadline:
			return fmt.Errorf("embedded k3s did not stop within %s", timeout)
		case <-tick.C:
		}
	}
}
