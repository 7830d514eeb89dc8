package deploy

import (
	"testing"
)

func TestSummarize(t *testing.T) {
	cat := Catalog{Services: []Service{{Name: "db", Chart: "db"}, {Name: "api", Chart: "api", DependsOn: []string{"db"}}}}
	tests := []struct {
		name      string
		desired   map[string]string
		observed  map[string]ChildStatus
		health    map[string]WorkloadHealth
		ready     map[string]bool
		problems  map[string]string
		wantState string // of api
		wantMsg   string
	}{
		{name: "waiting for dependency", desired: map[string]string{"db": "1", "api": "2"},
			wantState: StateWaiting, wantMsg: "waiting for db"},
		{name: "pending when dependency ready", desired: map[string]string{"db": "1", "api": "2"}, ready: map[string]bool{"db": true},
			wantState: StatePending},
		{name: "installing with workload reason", desired: map[string]string{"db": "1", "api": "2"}, ready: map[string]bool{"db": true},
			observed: map[string]ChildStatus{"api": {Revision: 1, ValuesHash: "2"}},
			health: map[string]WorkloadHealth{
				"Deployment/ns/api": {Kind: "Deployment", Name: "api", Release: "api", Reason: "pod x: container c not ready (readiness probe failing)"},
				"Deployment/ns/db":  {Kind: "Deployment", Name: "db", Release: "db", Reason: "not mine"}},
			wantState: StateInstalling, wantMsg: "Deployment/api: pod x: container c not ready (readiness probe failing)"},
		{name: "failed job", desired: map[string]string{"db": "1", "api": "2"}, ready: map[string]bool{"db": true},
			observed:  map[string]ChildStatus{"api": {Revision: 1, ValuesHash: "2"}},
			health:    map[string]WorkloadHealth{"Job/ns/api-init": {Kind: "Job", Name: "api-init", Release: "api", Reason: "job failed", Failed: true}},
			wantState: StateFailed, wantMsg: "Job/api-init: job failed"},
		{name: "helm problem wins", desired: map[string]string{"db": "1", "api": "2"}, ready: map[string]bool{"db": true, "api": true},
			observed: map[string]ChildStatus{"api": {Revision: 1, ValuesHash: "2"}}, problems: map[string]string{"api": "helm upgrade api: boom"},
			wantState: StateFailed, wantMsg: "helm upgrade api: boom"},
		{name: "helm revision failed", desired: map[string]string{"db": "1", "api": "2"}, ready: map[string]bool{"db": true},
			observed:  map[string]ChildStatus{"api": {Revision: 2, State: StateFailed, Message: "helm revision 2 failed: x"}},
			wantState: StateFailed, wantMsg: "helm revision 2 failed: x"},
		{name: "ready", desired: map[string]string{"db": "1", "api": "2"}, ready: map[string]bool{"db": true, "api": true},
			observed:  map[string]ChildStatus{"api": {Revision: 3, ValuesHash: "2", Chart: "api", Version: "0.1.0"}},
			wantState: StateReady},
		{name: "ready workloads but values changed", desired: map[string]string{"db": "1", "api": "3"}, ready: map[string]bool{"db": true, "api": true},
			observed:  map[string]ChildStatus{"api": {Revision: 3, ValuesHash: "2"}},
			wantState: StateInstalling},
		{name: "upgrade waits for dependency", desired: map[string]string{"db": "1", "api": "3"}, ready: map[string]bool{"api": true},
			observed:  map[string]ChildStatus{"api": {Revision: 3, ValuesHash: "2"}},
			wantState: StateWaiting, wantMsg: "upgrade waiting for db"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := Summarize(cat, tt.desired, tt.observed, tt.health, tt.ready, tt.problems)
			got := st.Children["api"]
			if got.State != tt.wantState || got.Message != tt.wantMsg {
				t.Fatalf("Summarize() api = %s %q, want %s %q", got.State, got.Message, tt.wantState, tt.wantMsg)
			}
			if got.Chart == "" {
				t.Errorf("Summarize() api chart is empty")
			}
			ready := setConditions(&st, 1, len(tt.desired))
			if want := tt.wantState == StateReady && st.Children["db"].State == StateReady; ready != want {
				t.Errorf("setConditions() ready = %v, want %v", ready, want)
			}
		})
	}
}
