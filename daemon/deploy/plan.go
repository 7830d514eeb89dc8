package deploy

import (
	"fmt"
	"sort"
)

// Op is what a plan asks Helm to do with one release.
type Op string

const (
	OpInstall Op = "install"
	OpUpgrade Op = "upgrade"
)

// Action is one Helm operation. Actions returned together by Plan are independent of each
// other and may run in parallel.
type Action struct {
	Service    string
	Chart      string
	Namespace  string
	Op         Op
	ValuesHash string // hash of the values the release must carry afterwards
	Level      int    // dependency level in the catalog (for display)
}

// Plan decides the next Helm actions.
//
//   - observed: the releases as they are (a release with Revision 0 or absent is missing; the
//     caller leaves ValuesHash empty for a release whose last revision did not deploy, so it is
//     retried);
//   - desired: the values hash of every enabled service (a service absent here is disabled and
//     never acted on; as a dependency it counts as provided elsewhere);
//   - ready: whether a service's workloads are all available and its Jobs complete.
//
// A service is installed when missing and upgraded when its values hash differs, and only
// once every enabled dependency is Ready with no action of its own pending. A converged
// deployment yields no actions. Plan refuses a catalog with a cycle or unknown dependency.
func Plan(cat Catalog, observed map[string]ChildStatus, desired map[string]string, ready map[string]bool) ([]Action, error) {
	return PlanHeld(cat, observed, desired, ready, nil)
}

// PlanHeld is Plan with held: services that cannot be acted on yet, with the reason
// (their images are not in the container runtime yet). Their actions wait, and so do
// their dependents'.
func PlanHeld(cat Catalog, observed map[string]ChildStatus, desired map[string]string, ready map[string]bool, held map[string]string) ([]Action, error) {
	levels, err := cat.Levels()
	if err != nil {
		return nil, err
	}
	for name := range desired {
		if _, ok := cat.Service(name); !ok {
			return nil, fmt.Errorf("plan: %q is not in the catalog", name)
		}
	}
	pending := map[string]bool{} // needs an action, whether or not it can run now
	var actions []Action
	for li, level := range levels {
		for _, name := range level {
			hash, enabled := desired[name]
			if !enabled {
				continue
			}
			svc, _ := cat.Service(name)
			obs, exists := observed[name]
			var op Op
			switch {
			case !exists || obs.Revision == 0:
				op = OpInstall
			case obs.ValuesHash != hash:
				op = OpUpgrade
			}
			if op != "" {
				pending[name] = true
			}
			if _, wait := held[name]; op == "" || wait || !depsReady(svc, desired, ready, pending) {
				continue
			}
			actions = append(actions, Action{Service: name, Chart: svc.Chart, Namespace: svc.Namespace, Op: op, ValuesHash: hash, Level: li})
		}
	}
	return actions, nil
}

// UnmetDependencies returns, per enabled service, the enabled dependencies that are not Ready
// (sorted).
// Services with none are left out.
func UnmetDependencies(cat Catalog, desired map[string]string, ready map[string]bool) map[string][]string {
	out := map[string][]string{}
	for _, s := range cat.Services {
		if _, ok := desired[s.Name]; !ok {
			continue
		}
		for _, d := range s.DependsOn {
			if _, enabled := desired[d]; enabled && !ready[d] {
				out[s.Name] = append(out[s.Name], d)
			}
		}
		sort.Strings(out[s.Name])
	}
	return out
}

func depsReady(svc Service, desired map[string]string, ready, pending map[string]bool) bool {
	for _, d := range svc.DependsOn {
		if _, enabled := desired[d]; !enabled {
			continue
		}
		if !ready[d] || pending[d] {
			return false
		}
	}
	return true
}
