package main

import (
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/osdcloud/osd/daemon/client"
)

// globals are the flags every command shares.
type globals struct {
	stateDir string
	runDir   string
	socket   string
}

func (g *globals) socketPath() string {
	if g.socket != "" {
		return g.socket
	}
	return filepath.Join(g.runDir, "osd.sock")
}

func (g *globals) client() *client.Client { return client.NewUnix(g.socketPath()) }

func newRootCmd() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "osd",
		Short:         "osd turns a Linux host into an OpenStack cloud",
		SilenceUsage:  true,
		SilenceErrors: true,
		CompletionOptions: cobra.CompletionOptions{
			DisableDefaultCmd: true,
		},
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.stateDir, "state-dir", envOr("OSD_STATE_DIR", client.DefaultStateDir), "directory of osd's persistent state (env OSD_STATE_DIR)")
	pf.StringVar(&g.runDir, "run-dir", envOr("OSD_RUN_DIR", client.DefaultRunDir), "directory of osd's sockets and runtime state (env OSD_RUN_DIR)")
	pf.StringVar(&g.socket, "socket", "", "daemon API socket (default RUN-DIR/osd.sock)")
	root.AddCommand(
		newDaemonCmd(g),
		newInitCmd(g),
		newPreflightCmd(g),
		newImagesCmd(g),
		newConfigCmd(g),
		newClusterCmd(g),
		newJoinCmd(g),
		newTrustCmd(g),
		newStatusCmd(g),
		newVersionCmd(g),
		newResetCmd(g),
		newLaunchCmd(g),
	)
	for _, tool := range []string{"kubectl", "ctr", "crictl"} {
		root.AddCommand(newToolCmd(g, tool))
	}
	return root
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
