package deploy

import (
	"reflect"
	"sort"
	"strings"
	"testing"
)

// TestStorageEdges: with Ceph enabled Glance and Cinder wait for it; with lvm (Ceph
// disabled) they wait only for Keystone; nothing waits for Cinder.
func TestStorageEdges(t *testing.T) {
	cat := DefaultCatalog()
	base := map[string]string{"coredns": "a", "mariadb": "a", "rabbitmq": "a", "memcached": "a", "keystone": "a"}
	ready := map[string]bool{"coredns": true, "mariadb": true, "rabbitmq": true, "memcached": true, "keystone": true}
	observed := map[string]ChildStatus{}
	for k := range base {
		observed[k] = ChildStatus{Revision: 1, ValuesHash: "a"}
	}
	tests := []struct {
		name    string
		enabled []string
		ready   []string
		want    []string // services installed in this pass
	}{
		{name: "ceph not ready", enabled: []string{"ceph", "glance", "cinder"}, want: []string{"ceph"}},
		{name: "ceph ready", enabled: []string{"ceph", "glance", "cinder"}, ready: []string{"ceph"}, want: []string{"cinder", "glance"}},
		{name: "lvm", enabled: []string{"glance", "cinder"}, want: []string{"cinder", "glance"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			desired, rd, obs := map[string]string{}, map[string]bool{}, map[string]ChildStatus{}
			for k, v := range base {
				desired[k] = v
			}
			for k, v := range ready {
				rd[k] = v
			}
			for k, v := range observed {
				obs[k] = v
			}
			for _, s := range tt.enabled {
				desired[s] = "b"
			}
			for _, s := range tt.ready {
				rd[s] = true
				obs[s] = ChildStatus{Revision: 1, ValuesHash: "b"}
			}
			plan, err := Plan(cat, obs, desired, rd)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range plan {
				got = append(got, a.Service)
			}
			sort.Strings(got) // independent actions; their order is by dependency level
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Plan(%s) installs %v, want %v", tt.name, got, tt.want)
			}
		})
	}
	for _, s := range cat.Services {
		for _, d := range s.DependsOn {
			if d == "cinder" {
				t.Errorf("%s depends on cinder: nothing needs Cinder to install", s.Name)
			}
		}
		if (s.Name == "ceph" || s.Name == "cinder") && s.Enabled {
			t.Errorf("catalog enables %s by default, want it enabled by the daemon's storage choice", s.Name)
		}
	}
}

// TestCRDStorageEnum: the API server accepts every storage backend the values layering
// accepts (the CRD's enum refused "ceph" once, failing osd init).
func TestCRDStorageEnum(t *testing.T) {
	crd, err := CRDManifest()
	if err != nil {
		t.Fatal(err)
	}
	prop := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["features"].Properties["storage"]
	enum := map[string]bool{}
	for _, e := range prop.Enum {
		enum[strings.Trim(string(e.Raw), `"`)] = true
	}
	for _, s := range []string{StorageCeph, StorageLVM, "file", "none"} {
		if _, err := featuresLayer(Features{Storage: s}); err != nil {
			t.Fatalf("featuresLayer(%s) = %v", s, err)
		}
		if !enum[s] {
			t.Errorf("CRD spec.features.storage enum %v lacks %q", enum, s)
		}
	}
}
