package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/osdcloud/osd/daemon/api"
)

// embeddedVersionUsage is how the embedded Kubernetes components describe the --version
// flag they register on pflag's global set.
const embeddedVersionUsage = "sets the reported version"

// run executes a fresh root command with args and returns what it printed.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestVersionFlag(t *testing.T) {
	out, err := run(t, "--version")
	if want := "osd " + api.Version + "\n"; err != nil || out != want {
		t.Errorf("osd --version = %q, %v, want %q", out, err, want)
	}
	// The embedded components' setter (--version=vX.Y.Z) must not be osd's flag.
	if out, err := run(t, "--version=v9.9.9"); err == nil || strings.Contains(out, "9.9.9\n") {
		t.Errorf("osd --version=v9.9.9 = %q, %v, want an error", out, err)
	}
}

// TestNoEmbeddedFlags checks that no command's help, completion or man page offers a flag
// of the embedded components, while the global set they need is still theirs.
func TestNoEmbeddedFlags(t *testing.T) {
	if embeddedFlags.Lookup("version") == nil {
		t.Skip("no embedded component registered --version on pflag's global set")
	}
	for _, args := range [][]string{
		{"--help"}, {"help", "daemon", "stop"}, {"help", "init"}, {"daemon", "--help"},
		{"__complete", "--"}, {"__complete", "daemon", "--"}, {"__complete", "images", "build", "--"},
	} {
		out, err := run(t, args...)
		if err != nil {
			t.Errorf("osd %s: %v", strings.Join(args, " "), err)
		}
		if strings.Contains(out, embeddedVersionUsage) {
			t.Errorf("osd %s offers the embedded components' --version:\n%s", strings.Join(args, " "), out)
		}
	}
	root := newRootCmd()
	allowed := map[string]bool{"help": true, "version": true, "state-dir": true, "run-dir": true, "socket": true}
	root.InitDefaultHelpFlag()
	root.InitDefaultVersionFlag()
	root.Flags().VisitAll(func(f *pflag.Flag) {
		if !allowed[f.Name] {
			t.Errorf("osd's global flag --%s (%s) is not one of osd's own", f.Name, f.Usage)
		}
	})
	// The daemon and the tools run the components in this process: they get the set back.
	for _, name := range []string{"daemon", "kubectl"} {
		c, _, err := root.Find([]string{name})
		if err != nil || c.PersistentPreRun == nil {
			t.Fatalf("osd %s: no PersistentPreRun (%v)", name, err)
		}
		c.PersistentPreRun(c, nil)
		if pflag.CommandLine != embeddedFlags {
			t.Errorf("after osd %s's PersistentPreRun, pflag.CommandLine is not the components' set", name)
		}
	}
}

func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{"bash": "complete -o default -F __start_osd osd", "zsh": "#compdef osd", "fish": "complete -c osd"} {
		t.Run(shell, func(t *testing.T) {
			out, err := run(t, "completion", shell)
			if err != nil || !strings.Contains(out, want) {
				t.Errorf("osd completion %s = %.80q, %v, want it to contain %q", shell, out, err, want)
			}
		})
	}
	if _, err := run(t, "completion", "powershell"); err == nil {
		t.Errorf("osd completion powershell = nil error, want one naming the shells")
	}
}

func TestHelpTopics(t *testing.T) {
	for _, c := range helpTopics() {
		out, err := run(t, "help", c.Name())
		if err != nil || !strings.Contains(out, c.Short) {
			t.Errorf("osd help %s = %.80q, %v, want the topic", c.Name(), out, err)
		}
	}
	out, _ := run(t, "help")
	if !strings.Contains(out, "Additional help topics") || !strings.Contains(out, "osd upgrades") {
		t.Errorf("osd help does not list the topics:\n%s", out)
	}
}

func TestManPages(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	if _, err := run(t, "man-pages", dir); err != nil {
		t.Fatalf("osd man-pages: %v", err)
	}
	var want []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.IsAvailableCommand() || c.IsAdditionalHelpTopicCommand() || !c.HasParent() {
			want = append(want, strings.ReplaceAll(c.CommandPath(), " ", "-")+".1")
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRootCmd())
	for _, name := range want {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("man page %s: %v", name, err)
			continue
		}
		if !bytes.Contains(b, []byte(".TH")) || bytes.Contains(b, []byte(embeddedVersionUsage)) {
			t.Errorf("man page %s: no .TH header, or it names the embedded components' --version", name)
		}
	}
	if got, _ := filepath.Glob(filepath.Join(dir, "*")); len(got) != len(want) {
		t.Errorf("osd man-pages wrote %d pages, want %d (%v)", len(got), len(want), want)
	}
}
