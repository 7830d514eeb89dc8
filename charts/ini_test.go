package charts

import (
	"context"
	"strings"
	"testing"

	"github.com/osdcloud/osd/daemon/deploy"
	"github.com/osdcloud/osd/daemon/deploy/helmclient"
)

// renderOutput renders chart from FS with spec and returns the manifests and Helm's error.
func renderOutput(t *testing.T, chart string, spec deploy.DeploymentSpec) (string, error) {
	t.Helper()
	svc, ok := deploy.DefaultCatalog().Service(chart)
	if !ok {
		t.Fatalf("catalog has no %s", chart)
	}
	ch, _, err := helmclient.LoadChart(FS, chart)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := deploy.Render(spec, svc, ch.Values)
	if err != nil {
		t.Fatal(err)
	}
	return helmclient.Template(context.Background(), ch, svc.Namespace, svc.Name, deploy.HelmValues(vals, ch.Values))
}

// TestINIRefusesInjectedNames renders keystone.conf (osd-lib's INI template) with
// overrides whose section names or keys would start another line, section, key or
// comment: oslo.config splits a line at the first '=' or ':' and continues a value on a
// line that starts with a space. Each render fails naming the bad name, and
// deploy.RenderINI refuses the same sections; unusual harmless names pass both.
func TestINIRefusesInjectedNames(t *testing.T) {
	conf := func(sections map[string]map[string]any) deploy.DeploymentSpec {
		m := map[string]any{}
		for k, v := range sections {
			m[k] = v
		}
		return overrides("keystone", map[string]any{"conf": map[string]any{"keystone": m}})
	}
	for _, tc := range []struct {
		name     string
		sections map[string]map[string]any
		want     string // "" = renders
	}{
		{"newline in a key", map[string]map[string]any{"DEFAULT": {"debug\n[database]\nconnection": "sqlite://"}}, "ini: key"},
		{"= in a key", map[string]map[string]any{"DEFAULT": {"debug = true\nx": "1"}}, "ini: key"},
		{"colon in a key", map[string]map[string]any{"DEFAULT": {"debug:true": "1"}}, "ini: key"},
		{"bracket in a key", map[string]map[string]any{"DEFAULT": {"[database": "1"}}, "ini: key"},
		{"leading space in a key", map[string]map[string]any{"DEFAULT": {" continuation": "1"}}, "ini: key"},
		{"comment key", map[string]map[string]any{"DEFAULT": {"#x": "1"}}, "ini: key"},
		{"semicolon comment key", map[string]map[string]any{"DEFAULT": {";x": "1"}}, "ini: key"},
		{"empty key", map[string]map[string]any{"DEFAULT": {"": "1"}}, "ini: key"},
		{"bracket in a section", map[string]map[string]any{"x]\n[DEFAULT": {"k": "v"}}, "ini: section name"},
		{"newline in a section", map[string]map[string]any{"a\nb": {"k": "v"}}, "ini: section name"},
		{"spaces around a section", map[string]map[string]any{" a ": {"k": "v"}}, "ini: section name"},
		{"newline in a value", map[string]map[string]any{"DEFAULT": {"k": "v\n[x]"}}, "ini: value contains a newline"},
		{"harmless names", map[string]map[string]any{"DEFAULT": {"a.b-c_d/e": "1"}, "filter:authtoken": {"x_y": "v w"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := renderOutput(t, "keystone", conf(tc.sections))
			_, goErr := deploy.RenderINI(tc.sections)
			if tc.want == "" {
				if err != nil || goErr != nil || !strings.Contains(out, `a.b-c_d/e = 1`) {
					t.Errorf("render = %v, RenderINI = %v; want both to render the names", err, goErr)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("render keystone with %q = %v, want an error saying %q", tc.sections, err, tc.want)
			}
			if goErr == nil {
				t.Errorf("deploy.RenderINI(%q) = nil error, want it refused like the template", tc.sections)
			}
		})
	}
}
