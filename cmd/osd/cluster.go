package main

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/osdcloud/osd/daemon/api"
)

func newClusterCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "Grow the cloud to more hosts: join tokens and members"}
	cmd.AddCommand(newClusterAddCmd(g), newClusterTokensCmd(g), newClusterRevokeCmd(g), newClusterListCmd(g), newClusterRemoveCmd(g),
		newClusterMaintenanceCmd(g))
	return cmd
}

func newClusterAddCmd(g *globals) *cobra.Command {
	var ttl string
	var roles []string
	cmd := &cobra.Command{
		Use:   "add NAME",
		Short: "Issue a single-use join token for the host NAME (osd join TOKEN on that host)",
		Long: "Issue a single-use join token for the host NAME, with the roles that host will have: the\n" +
			"joining host cannot choose its own. Keep the token secret until it is used: whoever holds it\n" +
			"can join as NAME until it expires (osd cluster revoke NAME withdraws it). Pass it to osd join\n" +
			"on standard input or in a file rather than on the command line where other users can see it.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var tok api.IssuedToken
			req := api.TokenRequest{Name: args[0], Roles: roles, TTL: ttl}
			if err := g.client().Query(cmd.Context(), "POST", "cluster/tokens", req, &tok); err != nil {
				return err
			}
			printToken(cmd.ErrOrStderr(), cmd.OutOrStdout(), tok)
			return nil
		},
	}
	cmd.Flags().StringVar(&ttl, "ttl", "1h", "how long the token is valid (e.g. 30m, 2h)")
	cmd.Flags().StringSliceVar(&roles, "role", api.DefaultJoinRoles, "roles of the joining host: compute, control, network, storage (repeat or comma-separate)")
	return cmd
}

// printToken writes what the token is for to stderr and the token alone to stdout, so
// `osd cluster add NAME > token` leaves a file that `osd join --token-file token` reads.
func printToken(stderr, stdout io.Writer, tok api.IssuedToken) {
	fmt.Fprintf(stderr, "Join token for %s, roles %s (single use, expires %s):\n", tok.Name, strings.Join(tok.Roles, ","),
		tok.Expires.Format("2006-01-02 15:04 MST"))
	fmt.Fprintln(stdout, tok.Token)
}

func newClusterTokensCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "tokens",
		Short: "List the join tokens not used yet",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			var list []api.TokenInfo
			if err := g.client().Query(cmd.Context(), "GET", "cluster/tokens", nil, &list); err != nil {
				return err
			}
			return render(os.Stdout, format, list, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "NAME\tROLES\tEXPIRES\tSTATE")
				for _, t := range list {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, strings.Join(t.Roles, ","), t.ExpiresAt.Format("2006-01-02 15:04 MST"), t.State)
				}
			})
		},
	}
	cmd.Flags().StringVar(&format, "format", "table", "output format: table, json or yaml")
	return cmd
}

func newClusterRevokeCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke the join token issued for NAME",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.client().Query(cmd.Context(), "DELETE", "cluster/tokens/"+url.PathEscape(args[0]), nil, nil); err != nil {
				return err
			}
			fmt.Printf("revoked the join token for %s\n", args[0])
			return nil
		},
	}
	return cmd
}

func newClusterListCmd(g *globals) *cobra.Command {
	var listFormat string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the cluster's members",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(listFormat); err != nil {
				return err
			}
			var members []api.Member
			if err := g.client().Query(cmd.Context(), "GET", "cluster/members", nil, &members); err != nil {
				return err
			}
			return render(os.Stdout, listFormat, members, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "NAME\tHOSTNAME\tADDRESS\tROLES\tNODE\tTUNNEL\tIMAGES\tSTATE\tVERSION\tLAST HEARTBEAT")
				for _, m := range members {
					fmt.Fprintln(tw, memberRow(m, time.Now()))
				}
			})
		},
	}
	cmd.Flags().StringVar(&listFormat, "format", "table", "output format: table, json or yaml")
	return cmd
}

func newClusterRemoveCmd(g *globals) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove a member: drain and delete its Kubernetes node, revoke its certificate, forget it",
		Long: "Remove a member: refused while VMs run on it unless --force. The node is cordoned and drained,\n" +
			"its Kubernetes node deleted, its member certificate no longer trusted. Its daemon notices at its\n" +
			"next heartbeat and stops; run osd reset on it to clean the host.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "cluster/members/" + url.PathEscape(args[0])
			if force {
				path += "?force=true"
			}
			if err := g.client().Query(cmd.Context(), "DELETE", path, nil, nil); err != nil {
				return err
			}
			fmt.Printf("removed %s from the cluster\n", args[0])
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "remove even while VMs run on it (they are lost)")
	return cmd
}

// memberRow is one line of osd cluster list (tab-separated).
func memberRow(m api.Member, now time.Time) string {
	hb := "never"
	if m.LastHeartbeat != nil {
		hb = now.Sub(*m.LastHeartbeat).Round(time.Second).String() + " ago"
		if m.Local {
			hb = "(this node)"
		}
	}
	str := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	node := str(m.NodeState)
	if m.Maintenance {
		node += ",maintenance"
	}
	return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", m.Name, str(m.Hostname), str(m.Address), str(strings.Join(m.Roles, ",")), node,
		str(m.Tunnel), str(m.Images), str(strings.Join(m.State, ",")), str(m.Version), hb)
}

func newClusterMaintenanceCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "maintenance NAME on|off",
		Short: "Put a node into maintenance (no new servers or pods there) or take it out",
		Long: "on disables the node's nova-compute, so the scheduler places no new server there (the servers\n" +
			"it runs keep running), and cordons its Kubernetes node; off enables and uncordons it again.\n" +
			"osd cluster list shows maintenance in the NODE column.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var on bool
			switch args[1] {
			case "on":
				on = true
			case "off":
			default:
				return fmt.Errorf("maintenance %q: want on or off", args[1])
			}
			var m api.Member
			path := "cluster/members/" + url.PathEscape(args[0]) + "/maintenance"
			if err := g.client().Query(cmd.Context(), "PUT", path, api.MaintenanceRequest{Enabled: on}, &m); err != nil {
				return err
			}
			if on {
				fmt.Printf("%s: maintenance on (nova-compute disabled: no new servers there; node cordoned)\n", m.Name)
			} else {
				fmt.Printf("%s: maintenance off (nova-compute enabled, node schedulable)\n", m.Name)
			}
			return nil
		},
	}
}

func newTrustCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "trust", Short: "Client certificates allowed to use the remote API (mutual TLS)"}
	add := &cobra.Command{
		Use:   "add NAME CERT.pem",
		Short: "Trust a client certificate for the remote API",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			pem, err := os.ReadFile(args[1])
			if err != nil {
				return fmt.Errorf("read certificate: %w", err)
			}
			var e api.TrustEntry
			if err := g.client().Query(cmd.Context(), "POST", "trust", api.TrustRequest{Name: args[0], Certificate: string(pem)}, &e); err != nil {
				return err
			}
			fmt.Printf("trusted %s (%s)\n", e.Name, e.Fingerprint)
			return nil
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List trusted certificates",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var entries []api.TrustEntry
			if err := g.client().Query(cmd.Context(), "GET", "trust", nil, &entries); err != nil {
				return err
			}
			return render(os.Stdout, "table", entries, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "NAME\tKIND\tFINGERPRINT")
				for _, e := range entries {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Name, e.Kind, e.Fingerprint)
				}
			})
		},
	}
	remove := &cobra.Command{
		Use:   "remove FINGERPRINT",
		Short: "Stop trusting a certificate",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.client().Query(cmd.Context(), "DELETE", "trust/"+url.PathEscape(args[0]), nil, nil)
		},
	}
	cmd.AddCommand(add, list, remove)
	return cmd
}
