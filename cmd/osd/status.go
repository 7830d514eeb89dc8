package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/osdcloud/osd/daemon/api"
)

// statusView is everything osd status shows.
type statusView struct {
	api.ServerInfo
	Init       *api.InitState        `json:"init,omitempty"`
	Deployment *api.DeploymentStatus `json:"deployment,omitempty"`
	Storage    *api.StorageStatus    `json:"storage,omitempty"`
}

func newStatusCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the daemon's state and why anything is not ready",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			c := g.client()
			info, err := c.ServerInfo(cmd.Context())
			if err != nil {
				return err
			}
			var st statusView
			st.ServerInfo = info
			if init, err := c.InitState(cmd.Context()); err == nil {
				st.Init = &init
			}
			if dep, err := c.Deployment(cmd.Context()); err == nil {
				st.Deployment = &dep
			}
			if storage, err := c.Storage(cmd.Context()); err == nil {
				st.Storage = &storage
			}
			return render(os.Stdout, format, st, statusTable(st))
		},
	}
	cmd.Flags().StringVar(&format, "format", "table", "output format: table, json or yaml")
	return cmd
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Show the versions of the CLI and of the running daemon",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Printf("client: %s\n", api.Version)
			info, err := g.client().ServerInfo(cmd.Context())
			if err != nil {
				fmt.Printf("daemon: unavailable (%v)\n", err)
				return nil
			}
			fmt.Printf("daemon: %s\n", info.Version)
			return nil
		},
	}
}

func checkFormat(f string) error {
	for _, ok := range formats {
		if f == ok {
			return nil
		}
	}
	return fmt.Errorf("unknown format %q: use one of table, json, yaml", f)
}

func errNeedRoot(what string) error {
	return fmt.Errorf("%s must run as root: try sudo %s", what, what)
}
