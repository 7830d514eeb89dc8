package main

import (
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

func newConfigCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Show the OpenStack deployment's configuration"}
	var rendered bool
	var format string
	show := &cobra.Command{
		Use:   "show --rendered SERVICE",
		Short: "Print a service's final Helm values: chart defaults <- profile <- features <- common <- service overrides",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] == "" {
				return fmt.Errorf("no service given: osd config show --rendered SERVICE (e.g. keystone)")
			}
			if !rendered {
				return fmt.Errorf("only the rendered view exists so far: use osd config show --rendered %s", args[0])
			}
			if format != "yaml" && format != "json" {
				return fmt.Errorf("unknown format %q: use yaml or json", format)
			}
			var vals map[string]any
			if err := g.client().Query(cmd.Context(), "GET", valuesPath(args[0]), nil, &vals); err != nil {
				return err
			}
			return render(os.Stdout, format, vals, nil)
		},
	}
	show.Flags().BoolVar(&rendered, "rendered", false, "show the values after every layer is merged")
	show.Flags().StringVar(&format, "format", "yaml", "output format: yaml or json")
	cmd.AddCommand(show)
	return cmd
}

// valuesPath is the API path of a service's rendered values. The name is escaped as one
// path segment: unescaped, "../images" would be cleaned by the router into another
// endpoint (GET /1.0/images answered as if it were values) and "?" would start a query.
// "." and ".." are escaped too (PathEscape leaves dots alone).
func valuesPath(service string) string {
	seg := url.PathEscape(service)
	if strings.Trim(seg, ".") == "" {
		seg = strings.ReplaceAll(seg, ".", "%2E")
	}
	return "deployment/values/" + seg
}
