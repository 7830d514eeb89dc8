package deploy

import (
	"reflect"
	"strings"
	"testing"
)

func TestLevels(t *testing.T) {
	tests := []struct {
		name    string
		cat     Catalog
		want    [][]string
		wantErr string
	}{
		// Only real dependencies: the infrastructure and OVN need nothing, every API
		// service installs side by side with Keystone, Nova after Placement.
		{name: "default", cat: DefaultCatalog(), want: [][]string{
			{"ceph", "coredns", "mariadb", "memcached", "ovn", "rabbitmq"},
			{"glance", "heat", "horizon", "keystone", "neutron", "placement"}, {"cinder", "nova"},
		}},
		{name: "cycle", cat: Catalog{Services: []Service{
			{Name: "a", DependsOn: []string{"c"}}, {Name: "b", DependsOn: []string{"a"}}, {Name: "c", DependsOn: []string{"b"}}, {Name: "d"},
		}}, wantErr: "cycle among [a b c]"},
		{name: "self", cat: Catalog{Services: []Service{{Name: "a", DependsOn: []string{"a"}}}}, wantErr: "cycle"},
		{name: "unknown", cat: Catalog{Services: []Service{{Name: "a", DependsOn: []string{"zz"}}}}, wantErr: "unknown service \"zz\""},
		{name: "duplicate", cat: Catalog{Services: []Service{{Name: "a"}, {Name: "a"}}}, wantErr: "twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.cat.Levels()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Levels() error = %v, want containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Levels() = %v, %v, want %v", got, err, tt.want)
			}
		})
	}
}

func TestPlan(t *testing.T) {
	cat := DefaultCatalog()
	first := map[string]string{"coredns": "h1", "mariadb": "h2", "rabbitmq": "h3", "memcached": "h4", "keystone": "h5"}
	converged := map[string]ChildStatus{}
	allReady := map[string]bool{}
	for k, h := range first {
		converged[k] = ChildStatus{Revision: 1, ValuesHash: h, State: StateReady}
		allReady[k] = true
	}
	with := func(m map[string]string, k, v string) map[string]string {
		out := map[string]string{}
		for a, b := range m {
			out[a] = b
		}
		out[k] = v
		return out
	}
	tests := []struct {
		name     string
		observed map[string]ChildStatus
		desired  map[string]string
		ready    map[string]bool
		held     map[string]string
		want     []string // "op service"
	}{
		{name: "fresh installs every root side by side", desired: first,
			want: []string{"install coredns", "install mariadb", "install memcached", "install rabbitmq"}},
		{name: "roots installed not ready: keystone waits", desired: first,
			observed: map[string]ChildStatus{"coredns": {Revision: 1, ValuesHash: "h1"}, "mariadb": {Revision: 1, ValuesHash: "h2"},
				"rabbitmq": {Revision: 1, ValuesHash: "h3"}, "memcached": {Revision: 1, ValuesHash: "h4"}}, want: nil},
		{name: "keystone waits for what it uses", desired: first,
			observed: map[string]ChildStatus{"coredns": {Revision: 1, ValuesHash: "h1"}, "mariadb": {Revision: 1, ValuesHash: "h2"},
				"rabbitmq": {Revision: 1, ValuesHash: "h3"}, "memcached": {Revision: 1, ValuesHash: "h4"}},
			ready: map[string]bool{"coredns": true, "mariadb": true, "rabbitmq": true}, want: nil},
		{name: "keystone does not wait for rabbitmq, which it does not use", desired: first,
			observed: map[string]ChildStatus{"coredns": {Revision: 1, ValuesHash: "h1"}, "mariadb": {Revision: 1, ValuesHash: "h2"},
				"rabbitmq": {Revision: 1, ValuesHash: "h3"}, "memcached": {Revision: 1, ValuesHash: "h4"}},
			ready: map[string]bool{"coredns": true, "mariadb": true, "memcached": true}, want: []string{"install keystone"}},
		{name: "converged yields nothing", observed: converged, desired: first, ready: allReady, want: nil},
		{name: "a held root waits, the others install", desired: first, held: map[string]string{"mariadb": "image mariadb is not imported yet"},
			want: []string{"install coredns", "install memcached", "install rabbitmq"}},
		{name: "a held upgrade waits and holds its dependents", observed: converged,
			desired: with(with(first, "mariadb", "h2b"), "keystone", "h5b"), ready: allReady, held: map[string]string{"mariadb": "image"}, want: nil},
		{name: "held keystone: its dependency installs, it waits", desired: first,
			observed: map[string]ChildStatus{"coredns": {Revision: 1, ValuesHash: "h1"}, "mariadb": {Revision: 1, ValuesHash: "h2"},
				"rabbitmq": {Revision: 1, ValuesHash: "h3"}, "memcached": {Revision: 1, ValuesHash: "h4"}},
			ready: map[string]bool{"coredns": true, "mariadb": true, "memcached": true, "rabbitmq": true}, held: map[string]string{"keystone": "image"}, want: nil},
		{name: "changed values upgrade", observed: converged, desired: with(first, "keystone", "h5b"), ready: allReady,
			want: []string{"upgrade keystone"}},
		{name: "dependent waits while its dependency upgrades", observed: converged,
			desired: with(with(first, "mariadb", "h2b"), "keystone", "h5b"), ready: allReady,
			want: []string{"upgrade mariadb"}},
		{name: "failed last revision (empty hash) is retried", desired: first, ready: allReady,
			observed: map[string]ChildStatus{"coredns": converged["coredns"], "mariadb": {Revision: 2, ValuesHash: "", State: StateFailed},
				"rabbitmq": converged["rabbitmq"], "memcached": converged["memcached"], "keystone": converged["keystone"]},
			want: []string{"upgrade mariadb"}},
		{name: "disabled dependency counts as provided", desired: map[string]string{"keystone": "h5"}, want: []string{"install keystone"}},
		{name: "disabled service is never touched", desired: map[string]string{"coredns": "h1"},
			observed: map[string]ChildStatus{"coredns": {Revision: 1, ValuesHash: "h1"}}, ready: map[string]bool{"coredns": true}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acts, err := PlanHeld(cat, tt.observed, tt.desired, tt.ready, tt.held)
			if err != nil {
				t.Fatalf("Plan() error = %v", err)
			}
			var got []string
			for _, a := range acts {
				got = append(got, string(a.Op)+" "+a.Service)
				if a.ValuesHash != tt.desired[a.Service] {
					t.Errorf("Plan() %s hash = %q, want %q", a.Service, a.ValuesHash, tt.desired[a.Service])
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Plan() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPlanRefusesCycleAndUnknown(t *testing.T) {
	cyc := Catalog{Services: []Service{{Name: "a", DependsOn: []string{"b"}}, {Name: "b", DependsOn: []string{"a"}}}}
	if _, err := Plan(cyc, nil, map[string]string{"a": "x"}, nil); err == nil {
		t.Fatalf("Plan(cycle) error = nil, want cycle error")
	}
	if _, err := Plan(DefaultCatalog(), nil, map[string]string{"nope": "x"}, nil); err == nil {
		t.Fatalf("Plan(unknown service) error = nil, want error")
	}
}

// TestPlanConvergesByWalking drives Plan as the controller would (every action succeeds and
// becomes ready) and checks every service is installed exactly once, deps first.
func TestPlanConvergesByWalking(t *testing.T) {
	cat := DefaultCatalog()
	desired := map[string]string{}
	for _, s := range cat.Services {
		desired[s.Name] = "v-" + s.Name
	}
	observed := map[string]ChildStatus{}
	ready := map[string]bool{}
	installs := map[string]int{}
	steps := 0
	for ; steps < 50; steps++ {
		acts, err := Plan(cat, observed, desired, ready)
		if err != nil {
			t.Fatal(err)
		}
		if len(acts) == 0 {
			break
		}
		for _, a := range acts {
			svc, _ := cat.Service(a.Service)
			for _, d := range svc.DependsOn {
				if !ready[d] {
					t.Fatalf("Plan() acted on %s before dependency %s was ready", a.Service, d)
				}
			}
			installs[a.Service]++
			observed[a.Service] = ChildStatus{Revision: 1, ValuesHash: a.ValuesHash}
			ready[a.Service] = true
		}
	}
	if levels, _ := DefaultCatalog().Levels(); steps != len(levels) {
		t.Errorf("steps = %d, want %d (one per dependency level)", steps, len(levels))
	}
	for _, s := range cat.Services {
		if installs[s.Name] != 1 {
			t.Errorf("installs[%s] = %d, want 1", s.Name, installs[s.Name])
		}
	}
}
