package deployment

import (
	"reflect"
	"testing"

	bimages "github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/daemon/deploy"
)

func TestReleaseValues(t *testing.T) {
	zed, _ := bimages.ReleaseNamed(bimages.Zed)
	epoxy, _ := bimages.ReleaseNamed(bimages.Epoxy)
	if v := ReleaseValues(zed); v != nil {
		t.Errorf("ReleaseValues(zed) = %v, want none: the charts' defaults are Zed's", v)
	}
	services := map[string]deploy.ServiceSpec{
		"neutron": {Overrides: map[string]any{"conf": map[string]any{"neutron": map[string]any{"DEFAULT": map[string]any{"debug": true}}}}},
	}
	applyReleaseValues(services, epoxy)
	want := map[string]any{"conf": map[string]any{"neutron": map[string]any{"DEFAULT": map[string]any{"debug": true, "api_workers": 1}}}}
	if got := services["neutron"].Overrides; !reflect.DeepEqual(got, want) {
		t.Errorf("neutron overrides on Epoxy = %v, want %v (the release's values beside the host's)", got, want)
	}
	// The host's own overrides win over the release's.
	services = map[string]deploy.ServiceSpec{
		"neutron": {Overrides: map[string]any{"conf": map[string]any{"neutron": map[string]any{"DEFAULT": map[string]any{"api_workers": 4}}}}},
	}
	applyReleaseValues(services, epoxy)
	if got := services["neutron"].Overrides["conf"].(map[string]any)["neutron"].(map[string]any)["DEFAULT"].(map[string]any)["api_workers"]; got != 4 {
		t.Errorf("api_workers = %v, want the host's 4", got)
	}
}
