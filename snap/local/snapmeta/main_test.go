package main

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestSnapYAML(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		want    map[string]any
		wantErr string
	}{
		{
			name: "drops what only snapcraft reads, sets the version, lists the architectures",
			src: "name: x\nsummary: s\nconfinement: classic\nadopt-info: p\nparts: {p: {plugin: nil}}\n" +
				"architectures: [{build-on: amd64}, {build-on: amd64, build-for: arm64}]\napps: {x: {command: bin/x}}\n",
			want: map[string]any{"name": "x", "summary": "s", "confinement": "classic", "version": "1.2",
				"architectures": []any{"amd64", "arm64"}, "apps": map[string]any{"x": map[string]any{"command": "bin/x"}}},
		},
		{name: "no apps", src: "name: x\nsummary: s\nconfinement: strict\n", wantErr: "no apps"},
		{name: "not yaml", src: "name: [", wantErr: "read snapcraft.yaml"},
		{name: "bad architectures", src: "name: x\nsummary: s\nconfinement: strict\napps: {}\narchitectures: amd64\n", wantErr: "want a list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := snapYAML([]byte(tt.src), "1.2")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("snapYAML() = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			var got map[string]any
			if err != nil || yaml.Unmarshal(out, &got) != nil {
				t.Fatalf("snapYAML() = %s, %v", out, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("snapYAML() = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestOsdSnapcraft checks the project's snapcraft.yaml: the command, the notify service
// whose stop signals only the daemon, and state under $SNAP_COMMON.
func TestOsdSnapcraft(t *testing.T) {
	src, err := os.ReadFile("../../snapcraft.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := snapYAML(src, "0.0.0+1.gabc")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Name, Confinement string
		Environment       map[string]string
		Apps              map[string]map[string]any
	}
	if err := yaml.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		what      string
		got, want any
	}{
		{"name", m.Name, "osd"},
		{"confinement", m.Confinement, "classic"},
		{"apps.osd.command", m.Apps["osd"]["command"], "bin/osd"},
		{"apps.daemon.daemon", m.Apps["daemon"]["daemon"], "notify"},
		{"apps.daemon.stop-mode", m.Apps["daemon"]["stop-mode"], "sigterm"},
		{"environment.OSD_STATE_DIR", m.Environment["OSD_STATE_DIR"], "$SNAP_COMMON/state"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("snap.yaml %s = %v, want %v", c.what, c.got, c.want)
		}
	}
}
