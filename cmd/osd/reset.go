package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

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
