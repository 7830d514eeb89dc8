package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/osdcloud/osd/daemon"
	"github.com/osdcloud/osd/daemon/api"
)

func newJoinCmd(g *globals) *cobra.Command {
	var roles []string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "join TOKEN",
		Short: "Join this host to an osd cloud with a token from `osd cluster add NAME` (- reads it from standard input)",
		Long: "Join this host to the cluster the token names: the local daemon checks the token and the cluster's\n" +
			"certificate, prepares the host for its roles, starts its embedded Kubernetes as an agent of the\n" +
			"cluster and registers. A join that fails part way resumes when osd join runs again (the token is\n" +
			"used up only by a completed join).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if os.Geteuid() != 0 {
				return errNeedRoot("osd join")
			}
			token, err := readToken(args[0], os.Stdin)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			c := g.client()
			if err := ensureDaemon(ctx, g, c); err != nil {
				return err
			}
			env, err := c.Raw(ctx, "POST", "cluster/join-remote", daemon.JoinRemoteRequest{Token: token, Roles: roles})
			if err != nil {
				return err
			}
			var st daemon.JoinStatus
			if err := env.MetadataAs(&st); err != nil {
				return err
			}
			if env.Type == api.SyncResponse {
				fmt.Printf("this node is already %s %s of the cluster at %s (roles %s)\n", st.Name, st.State, st.Server, strings.Join(st.Roles, ","))
				return nil
			}
			fmt.Printf("joining the cluster at %s as %s with roles %s\n", st.Server, st.Name, strings.Join(st.Roles, ","))
			id := strings.TrimPrefix(env.Operation, "/1.0/operations/")
			if err := followOperation(ctx, c, id); err != nil {
				return fmt.Errorf("%w\nfix the cause and run osd join again: it resumes where it stopped", err)
			}
			fmt.Printf("%s joined the cluster: osd cluster list on a member shows it\n", st.Name)
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&roles, "role", []string{"compute", "network"}, "roles of this node: compute, control, network, storage (repeat or comma-separate)")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "give up waiting after this long (the daemon keeps joining; a re-run follows it)")
	return cmd
}

// readToken returns the token argument, or the first line of in when it is "-".
func readToken(arg string, in io.Reader) (string, error) {
	if arg != "-" {
		return strings.TrimSpace(arg), nil
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", fmt.Errorf("read the join token from standard input: %w", err)
	}
	if line = strings.TrimSpace(line); line == "" {
		return "", fmt.Errorf("no join token on standard input")
	}
	return line, nil
}
