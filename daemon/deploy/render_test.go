package deploy

import (
	"reflect"
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	keystone, _ := DefaultCatalog().Service("keystone")
	mariadb, _ := DefaultCatalog().Service("mariadb")
	defaults := map[string]any{"replicas": 5, "uwsgi": map[string]any{"processes": 2, "threads": 4}, "debug": false, "extra": "x"}
	imgs := map[string]string{"openstack": "osd/openstack:1", "mariadb": "osd/mariadb:1"}
	tests := []struct {
		name    string
		spec    DeploymentSpec
		svc     Service
		want    map[string]any
		wantErr string
	}{
		{name: "defaults and single-node", spec: DeploymentSpec{Images: imgs}, svc: keystone, want: map[string]any{
			"replicas": 1, "uwsgi": map[string]any{"processes": 2, "threads": 4}, "debug": false, "extra": "x",
			"images": map[string]any{"openstack": "osd/openstack:1"}, "features": map[string]any{"storage": "file", "network": "ovn", "tls": false}, "openstackRelease": "zed"}},
		{name: "ha, features, common then service win", svc: keystone, spec: DeploymentSpec{
			Profile: ProfileHA, Images: imgs, Features: Features{Storage: "lvm", TLS: true},
			Common:   map[string]any{"debug": true, "replicas": 2, "uwsgi": map[string]any{"threads": 8}},
			Services: map[string]ServiceSpec{"keystone": {Overrides: map[string]any{"replicas": 4, "extra": nil}}},
		}, want: map[string]any{
			"replicas": 4, "uwsgi": map[string]any{"processes": 2, "threads": 8}, "debug": true,
			"images": map[string]any{"openstack": "osd/openstack:1"}, "features": map[string]any{"storage": "lvm", "network": "ovn", "tls": true}, "openstackRelease": "zed"}},
		{name: "ha keeps stateful single", svc: mariadb, spec: DeploymentSpec{Profile: ProfileHA, Images: imgs}, want: map[string]any{
			"replicas": 1, "uwsgi": map[string]any{"processes": 2, "threads": 4}, "debug": false, "extra": "x",
			"images": map[string]any{"mariadb": "osd/mariadb:1"}, "features": map[string]any{"storage": "file", "network": "ovn", "tls": false}, "openstackRelease": "zed"}},
		{name: "release", svc: mariadb, spec: DeploymentSpec{Release: "epoxy", Images: imgs}, want: map[string]any{
			"replicas": 1, "uwsgi": map[string]any{"processes": 2, "threads": 4}, "debug": false, "extra": "x",
			"images": map[string]any{"mariadb": "osd/mariadb:1"}, "features": map[string]any{"storage": "file", "network": "ovn", "tls": false}, "openstackRelease": "epoxy"}},
		{name: "missing image", svc: keystone, spec: DeploymentSpec{}, wantErr: "image \"openstack\""},
		{name: "bad profile", svc: keystone, spec: DeploymentSpec{Images: imgs, Profile: "huge"}, wantErr: "unknown profile"},
		{name: "bad storage", svc: keystone, spec: DeploymentSpec{Images: imgs, Features: Features{Storage: "s3"}}, wantErr: "unknown storage"},
		{name: "bad network", svc: keystone, spec: DeploymentSpec{Images: imgs, Features: Features{Network: "ovs"}}, wantErr: "unknown network"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Render(tt.spec, tt.svc, defaults)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Render() error = %v, want containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Render() = %v, %v, want %v", got, err, tt.want)
			}
		})
	}
}

func TestHelmValues(t *testing.T) {
	defaults := map[string]any{"a": 1, "m": map[string]any{"x": 1, "y": 2}, "gone": map[string]any{"z": 1}}
	rendered := map[string]any{"a": 2, "m": map[string]any{"x": 1}, "new": true}
	want := map[string]any{"a": 2, "m": map[string]any{"x": 1, "y": nil}, "gone": nil, "new": true}
	if got := HelmValues(rendered, defaults); !reflect.DeepEqual(got, want) {
		t.Fatalf("HelmValues() = %v, want %v", got, want)
	}
	if _, ok := rendered["gone"]; ok {
		t.Fatalf("HelmValues() modified its input")
	}
}
