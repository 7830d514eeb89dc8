package charts

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/osdcloud/osd/daemon/deploy"
	"github.com/osdcloud/osd/daemon/deploy/helmclient"
	"sigs.k8s.io/yaml"
)

// snapshotVariants are the value sets every chart of the catalog is rendered with by
// TestRenderSnapshot: the defaults and the layouts the charts branch on.
var snapshotVariants = []struct {
	name      string
	storage   string
	overrides map[string]any
}{
	{name: "default"},
	{name: "ceph", storage: deploy.StorageCeph, overrides: map[string]any{"ceph": map[string]any{"monHost": "10.0.0.5"}}},
	{name: "lvm", storage: deploy.StorageLVM, overrides: map[string]any{"lvm": map[string]any{"node": "node-1"}}},
	{name: "ha", storage: deploy.StorageCeph, overrides: map[string]any{"replicas": 3, "ceph": map[string]any{"monHost": "10.0.0.5"}}},
	{name: "node", overrides: map[string]any{"node": "node-1", "persistence": map[string]any{"hostPath": "/var/lib/osd/x"}}},
	{name: "clusterip", overrides: map[string]any{"service": map[string]any{"type": "ClusterIP"}, "onDemand": false,
		"apache": map[string]any{"inactivityTimeout": 0}, "mallocTrimSeconds": 0}},
}

// snapshotRender renders every chart of the catalog in every variant: file name to its
// documents (parsed YAML, keyed by Kind/name), or to the render error.
func snapshotRender(t *testing.T) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	images := map[string]string{"ceph": "localhost/osd/ceph:test"}
	for k, v := range testImages {
		images[k] = v
	}
	for _, svc := range deploy.DefaultCatalog().Services {
		ch, _, err := helmclient.LoadChart(FS, svc.Chart)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range snapshotVariants {
			// Only the overrides the chart has values for (deploy.Render refuses others).
			o := map[string]any{}
			for k, val := range v.overrides {
				if _, ok := ch.Values[k]; ok {
					o[k] = val
				}
			}
			spec := deploy.DeploymentSpec{Images: images, Features: deploy.Features{Storage: v.storage},
				Services: map[string]deploy.ServiceSpec{svc.Name: {Overrides: o}}}
			docs := map[string]any{}
			vals, err := deploy.Render(spec, svc, ch.Values)
			var text string
			if err == nil {
				text, err = helmclient.Template(context.Background(), ch, svc.Namespace, svc.Name, deploy.HelmValues(vals, ch.Values))
			}
			if err != nil {
				docs["error"] = err.Error()
			}
			for _, doc := range strings.Split(text, "\n---\n") {
				var d map[string]any
				if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
					t.Fatalf("%s/%s: %v", svc.Name, v.name, err)
				}
				if d == nil {
					continue
				}
				meta, _ := d["metadata"].(map[string]any)
				docs[fmt.Sprintf("%v/%v", d["kind"], meta["name"])] = d
			}
			out[svc.Name+"-"+v.name+".yaml"] = docs
		}
	}
	return out
}

// TestRenderSnapshot is a tool for template refactors, run by hand: with
// OSD_RENDER_DUMP=DIR it writes every chart's render in every variant to DIR (one YAML file
// each); with OSD_RENDER_COMPARE=DIR it renders again and compares with DIR's files as
// parsed YAML, so that key order and whitespace do not count and any other change does.
func TestRenderSnapshot(t *testing.T) {
	dump, compare := os.Getenv("OSD_RENDER_DUMP"), os.Getenv("OSD_RENDER_COMPARE")
	if dump == "" && compare == "" {
		t.Skip("OSD_RENDER_DUMP or OSD_RENDER_COMPARE not set")
	}
	got := snapshotRender(t)
	names := make([]string, 0, len(got))
	for n := range got {
		names = append(names, n)
	}
	sort.Strings(names)
	if dump != "" {
		if err := os.MkdirAll(dump, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			b, err := yaml.Marshal(got[n])
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dump, n), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("wrote %d renders to %s", len(names), dump)
	}
	if compare == "" {
		return
	}
	same := 0
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(compare, n))
		if err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		var want map[string]any
		if err := yaml.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		// Through YAML once, as the dump was, so that numbers compare alike.
		b, _ = yaml.Marshal(got[n])
		var have map[string]any
		_ = yaml.Unmarshal(b, &have)
		ok := true
		for _, k := range sortedKeys(want, have) {
			if !reflect.DeepEqual(want[k], have[k]) {
				ok = false
				for _, d := range diffPaths(k, want[k], have[k]) {
					t.Errorf("%s: %s", n, d)
				}
			}
		}
		if ok {
			same++
		}
	}
	t.Logf("%d of %d renders the same as %s", same, len(names), compare)
}

func sortedKeys(ms ...map[string]any) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range ms {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

// diffPaths names where a and b differ (their paths, with both values cut short).
func diffPaths(path string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		var out []string
		for _, k := range sortedKeys(am, bm) {
			if !reflect.DeepEqual(am[k], bm[k]) {
				out = append(out, diffPaths(path+"."+k, am[k], bm[k])...)
			}
		}
		return out
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		var out []string
		for i := range al {
			if !reflect.DeepEqual(al[i], bl[i]) {
				out = append(out, diffPaths(fmt.Sprintf("%s[%d]", path, i), al[i], bl[i])...)
			}
		}
		return out
	}
	return []string{fmt.Sprintf("%s: was %.200v, now %.200v", path, a, b)}
}
