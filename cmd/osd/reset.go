package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/osdcloud/osd/daemon/client"
	"github.com/osdcloud/osd/daemon/reset"
	"github.com/osdcloud/osd/daemon/state"
)

func newResetCmd(g *globals) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "reset",
		Short: "Stop osd and remove everything it created on this host (state, Kubernetes, workloads)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if os.Geteuid() != 0 {
				return errNeedRoot("osd reset")
			}
			if !yes {
				ok, err := confirm(fmt.Sprintf("This stops osd and deletes %s, %s and every workload osd runs. Continue? [y/N] ", g.stateDir, g.runDir))
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("reset cancelled; nothing was changed")
				}
			}
			return runReset(cmd.Context(), g)
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}

func confirm(prompt string) (bool, error) {
	if _, err := unix.IoctlGetTermios(int(os.Stdin.Fd()), unix.TCGETS); err != nil {
		return false, fmt.Errorf("reset needs confirmation: run it on a terminal or pass --yes")
	}
	fmt.Print(prompt)
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "y" || a == "yes", nil
}

func runReset(ctx context.Context, g *globals) error {
	if err := stopDaemon(g); err != nil {
		return err
	}
	err := reset.Reset(ctx, state.Config{StateDir: g.stateDir, RunDir: g.runDir, Socket: g.socket}, os.Stdout)
	if err != nil {
		return fmt.Errorf("reset incomplete (re-run osd reset): %w", err)
	}
	fmt.Println("osd reset: done")
	return nil
}

// stopDaemon stops a running daemon: through systemd when it runs the daemon, else by
// SIGTERM to the lock holder, escalating to SIGKILL after two minutes.
func stopDaemon(g *globals) error {
	if _, err := os.Stat("/run/systemd/system"); err == nil && g.stateDir == client.DefaultStateDir {
		if exec.Command("systemctl", "is-active", "--quiet", "osd.service").Run() == nil {
			if out, err := exec.Command("systemctl", "stop", "osd.service").CombinedOutput(); err != nil {
				return fmt.Errorf("systemctl stop osd: %w: %s", err, strings.TrimSpace(string(out)))
			}
		}
	}
	pid, held := client.LockHolder(g.stateDir)
	if !held {
		return nil
	}
	fmt.Printf("stopping osd daemon (pid %d)\n", pid)
	syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if _, held := client.LockHolder(g.stateDir); !held {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	fmt.Printf("osd daemon did not stop in 2 minutes; killing it\n")
	syscall.Kill(pid, syscall.SIGKILL)
	time.Sleep(time.Second)
	return nil
}
