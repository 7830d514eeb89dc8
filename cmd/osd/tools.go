package main

// The multicall side of the CLI: osd kubectl, ctr and crictl run the embedded cluster's
// tools in this process against osd's own Kubernetes and containerd.

import (
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/osdcloud/osd/daemon/k3s"
)

func (g *globals) paths() k3s.Paths { return k3s.Paths{StateDir: g.stateDir, RunDir: g.runDir} }

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
