package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	"github.com/osdcloud/osd/daemon/api"
)

// Output formats of the commands that print data.
var formats = []string{"table", "json", "yaml"}

// render prints v as JSON or YAML, or calls table for the human format.
func render(w io.Writer, format string, v any, table func(*tabwriter.Writer)) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case "table", "":
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		table(tw)
		return tw.Flush()
	default:
		return fmt.Errorf("unknown format %q: use one of %v", format, formats)
	}
}

// statusTable is the human view of the daemon's state.
func statusTable(info api.ServerInfo) func(*tabwriter.Writer) {
	return func(tw *tabwriter.Writer) {
		fmt.Fprintf(tw, "daemon\t%s (version %s, up %s)\n", info.State, info.Version, info.Uptime)
		fmt.Fprintf(tw, "state dir\t%s\n", info.StateDir)
		k := info.Kubernetes
		api := "not ready"
		if k.APIReady {
			api = "ready"
		}
		node := "not ready"
		if k.NodeReady {
			node = "Ready"
		}
		fmt.Fprintf(tw, "kubernetes API\t%s\n", api)
		fmt.Fprintf(tw, "node %s\t%s\n", k.NodeName, node)
		if k.Reason != "" {
			fmt.Fprintf(tw, "why\t%s\n", k.Reason)
		}
	}
}
