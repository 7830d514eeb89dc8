package deploy

import (
	"reflect"
	"testing"

	"github.com/osdcloud/osd/charts"
)

// TestControllerKeyKeepsChartValues: for every chart of the catalog, what Helm gets holds
// every rendered value unchanged beside the controller's bookkeeping; no chart's defaults
// use the reserved key. Ceph's OSD block size from an override reaches its release (the
// bookkeeping once sat under `osd` and replaced Ceph's `osd` section).
func TestControllerKeyKeepsChartValues(t *testing.T) {
	c := &Controller{Charts: charts.FS}
	images := map[string]string{}
	for _, svc := range DefaultCatalog().Services {
		for _, img := range svc.Images {
			images[img] = "localhost/osd/" + img + ":test"
		}
	}
	const size = 19327352832
	spec := DeploymentSpec{Images: images, Services: map[string]ServiceSpec{
		"ceph": {Overrides: map[string]any{"osd": map[string]any{"blockSizeBytes": size}}},
	}}
	for _, svc := range DefaultCatalog().Services {
		t.Run(svc.Name, func(t *testing.T) {
			lc, err := c.chart(svc.Chart)
			if err != nil {
				t.Fatal(err)
			}
			if _, taken := lc.chart.Values[ControllerValuesKey]; taken {
				t.Fatalf("chart %s defaults use the reserved key %q", svc.Chart, ControllerValuesKey)
			}
			rendered, err := Render(spec, svc, lc.chart.Values)
			if err != nil {
				t.Fatal(err)
			}
			_, vals, _, err := c.helmValues(spec, svc)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range HelmValues(rendered, lc.chart.Values) {
				if !reflect.DeepEqual(vals[k], v) {
					t.Errorf("helmValues()[%q] = %v, want the rendered %v", k, vals[k], v)
				}
			}
			if got, _ := vals[ControllerValuesKey].(map[string]any)["chartDigest"].(string); got != lc.digest {
				t.Errorf("helmValues()[%q].chartDigest = %q, want %q", ControllerValuesKey, got, lc.digest)
			}
			if svc.Name == "ceph" {
				osd, _ := vals["osd"].(map[string]any)
				if osd["blockSizeBytes"] != size {
					t.Errorf("ceph release values osd.blockSizeBytes = %v, want %d", osd["blockSizeBytes"], size)
				}
			}
		})
	}
}

// TestControllerKeyRefusesCollision: values that already hold the reserved key are refused
// rather than silently replaced.
func TestControllerKeyRefusesCollision(t *testing.T) {
	if _, err := withControllerKey(map[string]any{ControllerValuesKey: 1}, "d"); err == nil {
		t.Fatal("withControllerKey(values with the reserved key) = nil error, want refused")
	}
	vals, err := withControllerKey(map[string]any{"osd": map[string]any{"x": 1}}, "d")
	if err != nil || vals["osd"].(map[string]any)["x"] != 1 {
		t.Fatalf("withControllerKey() = %v, %v, want osd kept", vals, err)
	}
}
