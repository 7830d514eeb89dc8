package deployment

import (
	bimages "github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/daemon/deploy"
)

// ReleaseValues are the values a release needs beyond the charts' defaults, by service
// (pure). The charts' defaults are Zed's; each later release's entry says what changed
// in OpenStack and why, so that the differences between releases are in one place.
func ReleaseValues(rel bimages.Release) map[string]map[string]any {
	switch rel.Name {
	case bimages.Epoxy:
		return map[string]map[string]any{
			// Neutron 2024.2 refuses api_workers 0 (at least 1): the API runs in one forked
			// worker (files/neutron-server.py then has no API to start after the fork). The
			// metadata agent reads neutron.conf too and refuses it just the same.
			"neutron": {"conf": map[string]any{"neutron": map[string]any{"DEFAULT": map[string]any{"api_workers": 1}}}},
		}
	}
	return nil
}

// applyReleaseValues merges rel's values into services' overrides, under what osd sets
// for the host (pure).
func applyReleaseValues(services map[string]deploy.ServiceSpec, rel bimages.Release) {
	for name, v := range ReleaseValues(rel) {
		ss := services[name]
		ss.Overrides = deploy.Merge(v, ss.Overrides)
		services[name] = ss
	}
}
