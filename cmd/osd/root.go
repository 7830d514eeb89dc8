package main

import (
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/osdcloud/osd/daemon/api"
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
		Use:   "osd",
		Short: "osd turns a Linux host into an OpenStack cloud",
		Long: "osd turns a Linux host into an OpenStack cloud: sudo osd init.\n\n" +
			"Help topics: osd help paths, osd help environment, osd help upgrades.",
		Version:       api.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		CompletionOptions: cobra.CompletionOptions{
			DisableDefaultCmd: true, // osd completion below
		},
	}
	root.SetVersionTemplate("osd {{.Version}}\n")
	pf := root.PersistentFlags()
	pf.StringVar(&g.stateDir, "state-dir", envOr("OSD_STATE_DIR", client.DefaultStateDir), "directory of osd's persistent state (env OSD_STATE_DIR)")
	pf.StringVar(&g.runDir, "run-dir", envOr("OSD_RUN_DIR", client.DefaultRunDir), "directory of osd's sockets and runtime state (env OSD_RUN_DIR)")
	pf.StringVar(&g.socket, "socket", "", "daemon API socket (default RUN-DIR/osd.sock)")
	daemonCmd := newDaemonCmd(g)
	daemonCmd.AddCommand(newDaemonStartCmd(g), newDaemonStopCmd(g), newDaemonRestartCmd(g))
	root.AddCommand(
		daemonCmd,
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
		newCompletionCmd(),
		newManPagesCmd(),
	)
	root.AddCommand(helpTopics()...)
	for _, tool := range embeddedTools {
		root.AddCommand(newToolCmd(g, tool))
	}
	keepEmbeddedFlagsOut(root)
	return root
}

// keepEmbeddedFlagsOut gives osd's command line a flag set of its own. The embedded
// Kubernetes components register flags on pflag's global set when their packages load
// (among them --version=vX.Y.Z, which sets the version they report), and cobra adds that
// set to the root command's persistent flags. The commands that run those components in
// this process (the daemon and the tools) get the global set back before they run: the
// components look their flags up there.
func keepEmbeddedFlagsOut(root *cobra.Command) {
	pflag.CommandLine = pflag.NewFlagSet("osd", pflag.ContinueOnError)
	for _, c := range root.Commands() {
		if c.Name() == "daemon" || slices.Contains(embeddedTools, c.Name()) {
			c.PersistentPreRun = func(*cobra.Command, []string) { pflag.CommandLine = embeddedFlags }
		}
	}
}

// embeddedTools are the embedded cluster's tools osd runs against its own cluster.
var embeddedTools = []string{"kubectl", "ctr", "crictl"}

// embeddedFlags is pflag's global set as the imported packages left it.
var embeddedFlags = pflag.CommandLine

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
