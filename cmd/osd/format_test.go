package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/osdcloud/osd/daemon/api"
)

func TestRenderStatus(t *testing.T) {
	ready := api.ServerInfo{Version: "1.0", State: api.StateRunning, StateDir: "/var/lib/osd", Uptime: "5s", OpenStack: "zed",
		Kubernetes: api.KubernetesStatus{APIReady: true, NodeName: "n1", NodeReady: true}}
	notReady := ready
	notReady.Kubernetes = api.KubernetesStatus{APIReady: true, NodeName: "n1", Reason: "node not ready: cni config uninitialized"}
	epoxy := ready
	epoxy.OpenStack, epoxy.OpenStackTitle = "epoxy", "2025.1 Epoxy (Debian 13's packages)"
	behind := ready
	behind.ReleaseUpgrade = "2025.1 Epoxy (Debian 13's packages)"
	tests := []struct {
		name, format string
		info         api.ServerInfo
		want         []string
		wantErr      bool
	}{
		{name: "table ready", format: "table", info: ready, want: []string{"daemon", "running", "node n1", "Ready", "openstack       Zed (Debian 12's packages)"}},
		{name: "table names the release as the daemon titles it", format: "table", info: epoxy, want: []string{"openstack       2025.1 Epoxy (Debian 13's packages)"}},
		{name: "table says a release upgrade is available", format: "table", info: behind, want: []string{"release upgrade", "2025.1 Epoxy (Debian 13's packages) is available, not done"}},
		{name: "table not ready says why", format: "table", info: notReady, want: []string{"not ready", "why", "cni config uninitialized"}},
		{name: "json", format: "json", info: notReady, want: []string{`"node_ready": false`, `"reason": "node not ready: cni config uninitialized"`}},
		{name: "yaml", format: "yaml", info: ready, want: []string{"node_ready: true", "state: running"}},
		{name: "unknown", format: "xml", info: ready, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			err := render(&b, tt.format, tt.info, statusTable(statusView{ServerInfo: tt.info}))
			if (err != nil) != tt.wantErr {
				t.Fatalf("render(%s) error = %v, want error %v", tt.format, err, tt.wantErr)
			}
			for _, w := range tt.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("render(%s) = %q, want it to contain %q", tt.format, b.String(), w)
				}
			}
		})
	}
}

func TestRenderRoundTrip(t *testing.T) {
	in := api.ServerInfo{Version: "v", State: api.StateStarting, Kubernetes: api.KubernetesStatus{NodeName: "x", Reason: "r"}}
	for _, format := range []string{"json", "yaml"} {
		var b bytes.Buffer
		if err := render(&b, format, in, nil); err != nil {
			t.Fatal(err)
		}
		var out api.ServerInfo
		var err error
		if format == "json" {
			err = json.Unmarshal(b.Bytes(), &out)
		} else {
			err = yaml.Unmarshal(b.Bytes(), &out)
		}
		if err != nil || out.Kubernetes.Reason != "r" || out.State != api.StateStarting {
			t.Errorf("render(%s) round trip = %+v, %v, want the input back", format, out, err)
		}
	}
}

func TestLeadingFlag(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"osd", "--state-dir", "/x", "kubectl", "get", "--state-dir", "/y"}, "/x"},
		{[]string{"osd", "--state-dir=/z", "kubectl"}, "/z"},
		{[]string{"osd", "kubectl", "--state-dir", "/y"}, "/def"},
	}
	for _, tt := range tests {
		if got := leadingFlag(tt.args, "kubectl", "--state-dir", "/def"); got != tt.want {
			t.Errorf("leadingFlag(%v) = %q, want %q", tt.args, got, tt.want)
		}
	}
}

func TestToolArgs(t *testing.T) {
	got := toolArgs([]string{"osd", "--state-dir", "/x", "kubectl", "get", "kubectl"}, "kubectl")
	if strings.Join(got, " ") != "get kubectl" {
		t.Errorf("toolArgs() = %v, want [get kubectl]", got)
	}
}

func TestStatusTableDeployment(t *testing.T) {
	st := statusView{ServerInfo: api.ServerInfo{State: api.StateRunning}, Deployment: &api.DeploymentStatus{
		Children: map[string]api.ChildStatus{
			"keystone": {State: "installing", Revision: 1, Message: "waiting for workloads"},
			"mariadb":  {State: "ready", Revision: 2},
		},
		Health: map[string]api.WorkloadHealth{
			"Job/openstack/keystone-init":   {Kind: "Job", Name: "keystone-init", Desired: 1, Reason: "init container db-sync: CrashLoopBackOff"},
			"StatefulSet/openstack/mariadb": {Kind: "StatefulSet", Name: "mariadb", Ready: 1, Desired: 1},
		},
	}}
	var b bytes.Buffer
	if err := render(&b, "table", st, statusTable(st)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"release keystone", "installing (revision 1): waiting for workloads", "release mariadb", "ready (revision 2)", "Job/keystone-init", "CrashLoopBackOff"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status table = %q, want it to contain %q", b.String(), want)
		}
	}
	if strings.Contains(b.String(), "StatefulSet/mariadb") {
		t.Errorf("status table lists a ready workload: %q", b.String())
	}
}

func TestProfileTable(t *testing.T) {
	s := func(name string, start, took int) api.Span {
		return api.Span{Name: name, Start: time.Duration(start) * time.Second, Took: time.Duration(took) * time.Second}
	}
	p := &api.Profile{
		Steps:        []api.Span{s("image-build", 1, 300), s("openstack", 310, 150)},
		Images:       []api.ImageProfile{{Name: "base", Phases: []api.Span{s("resolve", 1, 2), s("install", 3, 30)}}, {Name: "pause", Cached: true, Phases: []api.Span{s("resolve", 1, 0)}}},
		Releases:     []api.ReleaseProfile{{Name: "keystone", Phases: []api.Span{s("waiting", 310, 20), s("helm", 330, 2), s("ready", 332, 40)}}, {Name: "ovn"}},
		CriticalPath: []api.Span{s("image base", 3, 30), s("release keystone", 330, 42)},
	}
	var b bytes.Buffer
	if err := render(&b, "table", p, profileTable(p)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"image-build  1s     5m0s", "base   1s     resolve 2s, install 30s", "pause  1s     cached; resolve 0s",
		"keystone  5m10s  waiting 20s, helm 2s, ready 40s", "ovn              unchanged",
		"critical path: image base 3s-33s -> release keystone 5m30s-6m12s"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("profileTable() =\n%s\nwant a line with %q", b.String(), want)
		}
	}
}
