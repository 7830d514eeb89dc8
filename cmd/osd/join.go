package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/osdcloud/osd/daemon/api"
)

func newJoinCmd(g *globals) *cobra.Command {
	var timeout time.Duration
	var tokenFile, tunnel string
	var roles []string
	cmd := &cobra.Command{
		Use:   "join [TOKEN | -]",
		Short: "Join this host to an osd cloud with a token from `osd cluster add NAME` (- or --token-file keep it off the command line)",
		Long: "Join this host to the cluster the token names: the local daemon checks the token and the cluster's\n" +
			"certificate, prepares the host for the roles the token gives it, starts its embedded Kubernetes as\n" +
			"an agent of the cluster and registers. A join that fails part way resumes when osd join runs again\n" +
			"(the token is used up only by a completed join).\n\n" +
			"The token is a secret: give it on standard input (osd join -) or in a file (--token-file) rather\n" +
			"than as an argument, which other users of this host can see in the process list. Given as an\n" +
			"argument, osd join hides it from the process list as soon as it starts.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("role") {
				return errors.New("osd join takes no --role: a node's roles come with its join token (on a member: osd cluster add NAME --role compute,network)")
			}
			if os.Geteuid() != 0 {
				return errNeedRoot("osd join")
			}
			if len(args) == 1 && args[0] != "-" && tokenFile == "" {
				// Not back unless the token could not be handed over out of sight.
				hideTokenArg(args[0])
			}
			token, err := tokenFrom(args, tokenFile, os.Stdin)
			if err != nil {
				return err
			}
			return runJoin(cmd.Context(), g, api.JoinRemoteRequest{Token: token, TunnelInterface: tunnel}, timeout)
		},
	}
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "read the join token from this file (its first line)")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "give up waiting after this long (the daemon keeps joining; a re-run follows it)")
	cmd.Flags().StringVar(&tunnel, "tunnel-interface", "", "the interface that reaches the other nodes, for Geneve tunnels: on the userspace OVS datapath it moves into the bridge br-phy with its addresses (default for compute and network nodes: the one holding the node's address; none: no bridge)")
	cmd.Flags().StringSliceVar(&roles, "role", nil, "no longer taken: roles come with the token")
	_ = cmd.Flags().MarkHidden("role")
	return cmd
}

func runJoin(ctx context.Context, g *globals, req api.JoinRemoteRequest, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := g.client()
	if err := ensureDaemon(ctx, g, c); err != nil {
		return err
	}
	id, st, done, err := c.Join(ctx, req)
	if err != nil {
		return err
	}
	if done {
		fmt.Printf("this node is already %s %s of the cluster at %s (roles %s)\n", st.Name, st.State, st.Server, strings.Join(st.Roles, ","))
		return nil
	}
	fmt.Printf("joining the cluster at %s as %s with roles %s\n", st.Server, st.Name, strings.Join(st.Roles, ","))
	if err := followOperation(ctx, c, id); err != nil {
		return fmt.Errorf("%w\nfix the cause and run osd join again: it resumes where it stopped", err)
	}
	fmt.Printf("%s joined the cluster: osd cluster list on a member shows it\n", st.Name)
	return nil
}

// tokenFrom returns the join token from file (when set), else from the argument, else
// from in when the argument is "-".
func tokenFrom(args []string, file string, in io.Reader) (string, error) {
	switch {
	case file != "" && len(args) > 0:
		return "", errors.New("give the join token either as an argument or with --token-file, not both")
	case file != "":
		f, err := os.Open(file)
		if err != nil {
			return "", fmt.Errorf("read the join token: %w", err)
		}
		defer f.Close()
		return firstLine(io.LimitReader(f, 64<<10), "in "+file)
	case len(args) == 0:
		return "", errors.New("no join token: give it as osd join - (on standard input), osd join --token-file FILE or osd join TOKEN")
	case args[0] == "-":
		return firstLine(in, "on standard input")
	}
	return strings.TrimSpace(args[0]), nil
}

// readToken returns the token argument, or the first line of in when it is "-".
func readToken(arg string, in io.Reader) (string, error) {
	return tokenFrom([]string{arg}, "", in)
}

func firstLine(in io.Reader, where string) (string, error) {
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", fmt.Errorf("read the join token %s: %w", where, err)
	}
	if line = strings.TrimSpace(line); line == "" {
		return "", fmt.Errorf("no join token %s", where)
	}
	return line, nil
}

// hideTokenArg re-executes osd with the token argument replaced by a pipe it can read it
// from, so the token leaves the process list (where every user of the host can read it)
// moments after it appeared there. It returns only when that cannot be done: the join
// then goes on with the token as it was given.
func hideTokenArg(token string) {
	argv, ok := withTokenFile(os.Args, token, -1)
	if !ok {
		return
	}
	self, err := os.Executable()
	if err != nil {
		return
	}
	r, w, err := os.Pipe()
	if err != nil {
		return
	}
	if _, err := io.WriteString(w, token+"\n"); err != nil {
		return
	}
	w.Close()
	fd := int(r.Fd())
	if _, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_SETFD, 0); errno != 0 {
		return
	}
	argv, _ = withTokenFile(os.Args, token, fd)
	err = syscall.Exec(self, argv, os.Environ())
	fmt.Fprintf(os.Stderr, "osd join: could not hide the token from the process list (%v); joining anyway\n", err)
	r.Close()
}

// withTokenFile returns argv with its one argument equal to token replaced by
// --token-file=/dev/fd/FD (pure); false when token is not exactly one argument.
func withTokenFile(argv []string, token string, fd int) ([]string, bool) {
	at := -1
	for i, a := range argv {
		if i > 0 && a == token {
			if at >= 0 {
				return nil, false
			}
			at = i
		}
	}
	if at < 0 {
		return nil, false
	}
	out := append([]string(nil), argv...)
	out[at] = fmt.Sprintf("--token-file=/dev/fd/%d", fd)
	return out, true
}
