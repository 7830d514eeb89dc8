package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/osdcloud/osd/bootstrap/preflight"
	"github.com/osdcloud/osd/daemon/client"
)

func newPreflightCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "preflight",
		Short: "Check whether this host can run osd, and say how to fix what stops it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "table" && format != "json" && format != "yaml" {
				return fmt.Errorf("unknown format %q: use one of table, json, yaml", format)
			}
			cfg := preflight.ProbeConfig{StateDir: g.stateDir, RunDir: g.runDir}
			if pid, ok := client.LockHolder(g.stateDir); ok {
				cfg.SelfPIDs = []int{os.Getpid(), pid}
			}
			rep, err := preflight.Run(cmd.Context(), cfg, preflight.DefaultRequirements())
			if err != nil && len(rep.Findings) == 0 {
				return err
			}
			if format == "table" {
				if err := preflight.WriteText(os.Stdout, rep.Findings); err != nil {
					return err
				}
			} else if err := render(os.Stdout, format, rep, nil); err != nil {
				return err
			}
			if rep.Failed {
				return exitError{1}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "table", "output format: table, json or yaml")
	return cmd
}
