package deploy

import "fmt"

// ControllerValuesKey is the top-level values key the controller keeps its own bookkeeping
// under in every release (the chart digest, so a new osd binary with changed templates
// upgrades the release). No chart may use it: a chart's own key of that name would be
// replaced by the bookkeeping (as Ceph's `osd` section once was, and with it the OSD's
// block size). The hyphen keeps it out of reach of `.Values.x` in templates.
const ControllerValuesKey = "x-osd-controller"

// withControllerKey adds the controller's bookkeeping to vals, refusing values that already
// hold the reserved key (a chart default or an override that would be silently replaced).
func withControllerKey(vals map[string]any, chartDigest string) (map[string]any, error) {
	if _, taken := vals[ControllerValuesKey]; taken {
		return nil, fmt.Errorf("values key %q is reserved for osd's controller: rename it in the chart or the override", ControllerValuesKey)
	}
	vals[ControllerValuesKey] = map[string]any{"chartDigest": chartDigest}
	return vals, nil
}
