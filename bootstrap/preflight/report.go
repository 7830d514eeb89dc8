package preflight

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
)

// Report is one complete preflight run, as `osd preflight --format json`
// prints it.
type Report struct {
	Facts     Facts     `json:"facts"`
	Decisions Decisions `json:"decisions"`
	Findings  []Finding `json:"findings"`
	Failed    bool      `json:"failed"`
}

// Run probes the host and evaluates it. A probe error is returned along with
// the report of whatever could be read (those facts stay zero and usually
// fail their checks).
func Run(ctx context.Context, cfg ProbeConfig, r Requirements) (Report, error) {
	f, err := Probe(ctx, cfg)
	fs := Evaluate(f, r)
	return Report{Facts: f, Decisions: Decide(f), Findings: fs, Failed: Failed(fs)}, err
}

// WriteText writes findings as an aligned table, each non-ok finding
// followed by its fix.
func WriteText(w io.Writer, fs []Finding) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, f := range fs {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Status, f.Check, f.Message)
		if f.Fix != "" {
			fmt.Fprintf(tw, "\t\t  fix: %s\n", f.Fix)
		}
	}
	return tw.Flush()
}
