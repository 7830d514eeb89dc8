package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/osdcloud/osd/daemon/api"
)

func newCompletionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print the shell completion script for bash, zsh or fish",
		Long: `Print the shell completion script for bash, zsh or fish.

The packages install them (bash: /usr/share/bash-completion/completions/osd, zsh:
/usr/share/zsh/vendor-completions/_osd, fish: /usr/share/fish/vendor_completions.d/osd.fish).
From a source build, for the current shell:

  source <(osd completion bash)
  osd completion fish | source`,
		Args:      cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		ValidArgs: []string{"bash", "zsh", "fish"},
		RunE: func(cmd *cobra.Command, args []string) error {
			root, out := cmd.Root(), cmd.OutOrStdout()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(out, true)
			case "zsh":
				return root.GenZshCompletion(out)
			default:
				return root.GenFishCompletion(out, true)
			}
		},
	}
}

// newManPagesCmd writes osd's man pages, generated from the commands, into a directory
// (the packages run it at build time). SOURCE_DATE_EPOCH dates them reproducibly.
func newManPagesCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "man-pages DIR",
		Short:  "Write osd's man pages to DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return writeManPages(cmd.Root(), args[0])
		},
	}
}

// writeManPages writes osd.1, one osd-COMMAND.1 per command and one osd-TOPIC.1 per help
// topic into dir.
func writeManPages(root *cobra.Command, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	header := func() *doc.GenManHeader {
		return &doc.GenManHeader{Section: "1", Source: "osd " + api.Version, Manual: "osd manual"}
	}
	root.DisableAutoGenTag = true
	if err := doc.GenManTree(root, header(), dir); err != nil {
		return fmt.Errorf("man pages: %w", err)
	}
	for _, c := range root.Commands() {
		if !c.IsAdditionalHelpTopicCommand() {
			continue
		}
		f, err := os.Create(filepath.Join(dir, "osd-"+c.Name()+".1"))
		if err != nil {
			return err
		}
		err = doc.GenMan(c, header(), f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("man page of %s: %w", c.Name(), err)
		}
	}
	return nil
}
