package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/client"
)

func newLaunchCmd(g *globals) *cobra.Command {
	var req api.LaunchRequest
	var format, volume string
	cmd := &cobra.Command{
		Use:   "launch [NAME]",
		Short: "Boot a test server (m1.tiny, image osd-test, network osd-net, keypair osd-key), give it a floating IP and wait until it answers ping and SSH",
		Long: `Boot a test server and say how to reach it. The server gets a floating IP from the
external network; osd waits (up to ~3 minutes under QEMU TCG) until the host can ping it,
and when it cannot, says why from what it can observe (server fault, port binding, DHCP
lease in the console log, router gateway, host route). NAME defaults to osd-test-<random>.

The server gets the keypair --key (default osd-key, which osd init makes once and whose
private key osd keeps 0600 next to clouds.yaml). For the test image osd-test with that
key, osd logs in over SSH once (the guest's host key, read from its console, recorded
in known_hosts next to it) and prints the ssh command that does it. A flavor, image,
network or keypair that does not exist is refused before anything is created.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "table" && format != "json" {
				return fmt.Errorf("unknown format %q: use table or json", format)
			}
			if len(args) == 1 {
				req.Name = args[0]
			}
			if err := parseVolumeSize(volume, &req); err != nil {
				return err
			}
			c := g.client()
			var op api.Operation
			if err := c.Query(cmd.Context(), "POST", "instances", req, &op); err != nil {
				return err
			}
			final, err := waitOperation(cmd.Context(), c, op.ID, format == "table")
			if err != nil {
				return err
			}
			var res api.LaunchResult
			if final.Result != nil {
				b, _ := json.Marshal(final.Result)
				json.Unmarshal(b, &res)
			}
			if format == "json" {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(res); err != nil {
					return err
				}
			} else if res.ID != "" {
				printLaunch(res)
			}
			if final.State != api.OperationSucceeded {
				return fmt.Errorf("launch %s: %s", final.State, final.Error)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Flavor, "flavor", "", "flavor, name or ID (default m1.tiny)")
	f.StringVar(&req.Image, "image", "", "image, name or ID (default osd-test)")
	f.StringVar(&req.Network, "network", "", "tenant network, name or ID (default osd-net)")
	f.StringVar(&req.Key, "key", "", "keypair for the server (default osd-key, made by osd init)")
	f.BoolVar(&req.NoWait, "no-wait", false, "return once Nova accepted the server (no floating IP, no ping)")
	f.StringVar(&format, "format", "table", "output format: table or json")
	f.StringVar(&volume, "volume", "", "boot from a new Cinder volume of this many GiB made from the image, e.g. 1 or 1G (deleted with the server)")
	return cmd
}

// waitOperation follows an operation until it ends, printing its events when show is set.
func waitOperation(ctx context.Context, c *client.Client, id string, show bool) (api.Operation, error) {
	shown := 0
	for {
		var op api.Operation
		if err := c.Query(ctx, "GET", "operations/"+id, nil, &op); err != nil {
			return op, err
		}
		for ; shown < len(op.Events); shown++ {
			if show {
				fmt.Println(op.Events[shown])
			}
		}
		if op.Done() {
			return op, nil
		}
		select {
		case <-ctx.Done():
			return op, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func printLaunch(r api.LaunchResult) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "name\t%s\n", r.Name)
	fmt.Fprintf(tw, "id\t%s\n", r.ID)
	fmt.Fprintf(tw, "status\t%s\n", r.Status)
	if r.FixedIP != "" {
		fmt.Fprintf(tw, "fixed IP\t%s\n", r.FixedIP)
	}
	if r.FloatingIP != "" {
		fmt.Fprintf(tw, "floating IP\t%s\n", r.FloatingIP)
	}
	if r.ActiveIn != "" {
		fmt.Fprintf(tw, "active after\t%s\n", r.ActiveIn)
	}
	if r.PingIn != "" {
		fmt.Fprintf(tw, "ping after\t%s\n", r.PingIn)
	}
	if r.SSHIn != "" {
		fmt.Fprintf(tw, "ssh after\t%s\n", r.SSHIn)
	}
	for i, p := range r.Profile {
		label := ""
		if i == 0 {
			label = "time spent"
		}
		fmt.Fprintf(tw, "%s\t%s: %.1f s\n", label, p.Name, p.Seconds)
	}
	if r.Key != "" {
		fmt.Fprintf(tw, "keypair\t%s\n", r.Key)
	}
	if r.Metadata != "" {
		fmt.Fprintf(tw, "metadata\t%s\n", r.Metadata)
	}
	if r.SSH != "" {
		fmt.Fprintf(tw, "ssh\t%s\n", r.SSH)
	}
	if r.Login != "" {
		fmt.Fprintf(tw, "console login\t%s\n", r.Login)
	}
	if r.Reach != "" {
		fmt.Fprintf(tw, "reach it\t%s\n", r.Reach)
	}
	if r.ConsoleURL != "" {
		fmt.Fprintf(tw, "console\t%s\n", r.ConsoleURL)
	}
	if len(r.Diagnosis) > 0 {
		fmt.Fprintf(tw, "why not reachable\t%s\n", strings.Join(r.Diagnosis, "\n\t"))
	}
	tw.Flush()
}
