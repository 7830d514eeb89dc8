package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

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

// statusTable is the human view of the daemon's state: the daemon, Kubernetes, the last
// converge run, and every release and workload with the reason when not ready.
func statusTable(st statusView) func(*tabwriter.Writer) {
	return func(tw *tabwriter.Writer) {
		info := st.ServerInfo
		fmt.Fprintf(tw, "daemon\t%s (version %s, up %s)\n", info.State, info.Version, info.Uptime)
		fmt.Fprintf(tw, "state dir\t%s\n", info.StateDir)
		if info.OpenStackTitle != "" {
			fmt.Fprintf(tw, "openstack\t%s\n", info.OpenStackTitle)
		} else if info.OpenStack != "" { // a daemon of an older osd: its one release was Zed from Debian 12
			fmt.Fprintf(tw, "openstack\t%s (Debian 12's packages)\n", releaseName(info.OpenStack))
		}
		if info.ReleaseUpgrade != "" {
			fmt.Fprintf(tw, "release upgrade\t%s is available, not done: osd keeps this cloud on its release until an upgrade is asked for\n", info.ReleaseUpgrade)
		}
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
		if in := st.Init; in != nil && in.State != "idle" {
			line := in.State
			if n := len(in.Steps); n > 0 && in.State == "running" {
				line += ": step " + in.Steps[n-1].Step
				if in.Detail != "" {
					line += " (" + strings.ReplaceAll(in.Detail, "\n", ", ") + ")"
				}
			}
			if in.Error != "" {
				line += ": " + in.Error
			}
			fmt.Fprintf(tw, "host converge\t%s\n", line)
		}
		if dep := st.Deployment; dep != nil {
			names := make([]string, 0, len(dep.Children))
			for n := range dep.Children {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				ch := dep.Children[n]
				line := ch.State
				if ch.Revision > 0 {
					line += fmt.Sprintf(" (revision %d)", ch.Revision)
				}
				if ch.Message != "" && ch.State != "ready" {
					line += ": " + ch.Message
				}
				fmt.Fprintf(tw, "release %s\t%s\n", n, line)
			}
			for _, l := range stateLines(dep.StateNodes) {
				fmt.Fprintln(tw, l)
			}
			keys := make([]string, 0, len(dep.Health))
			for k := range dep.Health {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				h := dep.Health[k]
				if h.Reason == "" {
					continue
				}
				fmt.Fprintf(tw, "  %s/%s\t%d/%d ready: %s\n", h.Kind, h.Name, h.Ready, h.Desired, h.Reason)
			}
		}
		storageLines(tw, st.Storage)
	}
}

// releaseName is an OpenStack release's name as OpenStack writes it ("zed" -> "Zed").
func releaseName(r string) string {
	if r == "" {
		return r
	}
	return strings.ToUpper(r[:1]) + r[1:]
}

// profileTable is where a converge run's time went: each step, image and release with
// its phases (start from the run's start, and length), and the critical path.
func profileTable(p *api.Profile) func(*tabwriter.Writer) {
	return func(tw *tabwriter.Writer) {
		d := func(x time.Duration) string { return x.Round(100 * time.Millisecond).String() }
		fmt.Fprintf(tw, "STEP\tSTART\tTOOK\n")
		for _, s := range p.Steps {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, d(s.Start), d(s.Took))
		}
		phases := func(ps []api.Span) string {
			var parts []string
			for _, s := range ps {
				parts = append(parts, s.Name+" "+d(s.Took))
			}
			return strings.Join(parts, ", ")
		}
		if len(p.Images) > 0 {
			fmt.Fprintf(tw, "\nIMAGE\tSTART\tPHASES\n")
			for _, im := range p.Images {
				start := ""
				if len(im.Phases) > 0 {
					start = d(im.Phases[0].Start)
				}
				how := phases(im.Phases)
				if im.Cached {
					how = "cached; " + how
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\n", im.Name, start, how)
			}
		}
		if len(p.Releases) > 0 {
			fmt.Fprintf(tw, "\nRELEASE\tSTART\tPHASES\n")
			for _, r := range p.Releases {
				if len(r.Phases) == 0 {
					fmt.Fprintf(tw, "%s\t\tunchanged\n", r.Name)
					continue
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Name, d(r.Phases[0].Start), phases(r.Phases))
			}
		}
		if len(p.CriticalPath) > 0 {
			var parts []string
			for _, s := range p.CriticalPath {
				parts = append(parts, fmt.Sprintf("%s %s-%s", s.Name, d(s.Start), d(s.End())))
			}
			fmt.Fprintf(tw, "\ncritical path: %s\n", strings.Join(parts, " -> "))
		}
	}
}

// stateLines say, node by node, which releases keep their data there and are pinned to it
// (tab-separated, sorted).
func stateLines(nodes map[string]string) []string {
	by := map[string][]string{}
	for rel, n := range nodes {
		by[n] = append(by[n], rel)
	}
	var out []string
	for n, rels := range by {
		sort.Strings(rels)
		out = append(out, fmt.Sprintf("state on %s\t%s (their data is on that node: they run only there)", n, strings.Join(rels, ", ")))
	}
	sort.Strings(out)
	return out
}
