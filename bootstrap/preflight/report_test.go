package preflight

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestWriteText(t *testing.T) {
	var b bytes.Buffer
	fs := []Finding{
		{Check: CheckCPUs, Status: OK, Message: "8 CPUs"},
		{Check: CheckStorage, Status: Warn, Message: "storage backend none", Fix: "modprobe dm_mod"},
	}
	if err := WriteText(&b, fs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ok    cpus") || !strings.Contains(lines[2], "fix: modprobe dm_mod") {
		t.Errorf("WriteText(...) =\n%s\nwant 3 aligned lines with the fix under the warning", b.String())
	}
}

func TestRunReportJSON(t *testing.T) {
	rep, err := Run(context.Background(), ProbeConfig{StateDir: t.TempDir()}, DefaultRequirements())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rep.Failed != Failed(rep.Findings) || len(rep.Findings) == 0 || rep.Decisions.VirtType == "" {
		t.Errorf("Run = %+v, want findings, decisions and a consistent failed flag", rep)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"facts", "decisions", "findings", "failed"} {
		if _, ok := back[k]; !ok {
			t.Errorf("Run report JSON lacks %q: %s", k, b)
		}
	}
}
