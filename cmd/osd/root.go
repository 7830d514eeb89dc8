package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/osdcloud/osd/daemon"
	"github.com/osdcloud/osd/daemon/client"
	"github.com/osdcloud/osd/daemon/k3s"
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

func (g *globals) paths() k3s.Paths { return k3s.Paths{StateDir: g.stateDir, RunDir: g.runDir} }

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
	pf.StringVar(&g.stateDir, "state-dir", envOr("OSD_STATE_DIR", daemon.DefaultStateDir), "directory of osd's persistent state (env OSD_STATE_DIR)")
	pf.StringVar(&g.runDir, "run-dir", envOr("OSD_RUN_DIR", daemon.DefaultRunDir), "directory of osd's sockets and runtime state (env OSD_RUN_DIR)")
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

// newToolCmd runs one of the embedded cluster's tools against osd's own cluster.
func newToolCmd(g *globals, tool string) *cobra.Command {
	return &cobra.Command{
		Use:                tool + " [ARGS...]",
		Short:              "Run " + tool + " against osd's embedded Kubernetes",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			// Flag parsing is off so the tool sees its own flags; osd's global flags given
			// before the tool's name are picked out of the command line here.
			g.stateDir, g.runDir = leadingFlag(os.Args, tool, "--state-dir", g.stateDir), leadingFlag(os.Args, tool, "--run-dir", g.runDir)
			k3s.RunTool(tool, toolArgs(os.Args, tool), k3s.ToolEnv(g.paths()))
			return nil
		},
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// leadingFlag returns the value of flag given before the word stop in args, or def.
func leadingFlag(args []string, stop, flag, def string) string {
	for i := 1; i < len(args) && args[i] != stop; i++ {
		if v, ok := strings.CutPrefix(args[i], flag+"="); ok {
			def = v
		} else if args[i] == flag && i+1 < len(args) {
			def = args[i+1]
			i++
		}
	}
	return def
}

// toolArgs is what follows the tool's name on the command line: cobra hands a command
// without flag parsing the osd flags given before the name too.
func toolArgs(args []string, tool string) []string {
	for i := 1; i < len(args); i++ {
		if args[i] == tool {
			return args[i+1:]
		}
	}
	return nil
}
