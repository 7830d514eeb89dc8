package storage

import (
	"testing"

	"github.com/osdcloud/osd/daemon/deploy"
)

// TestApply: the deployment enables Ceph and Cinder for the backend, pins Ceph to the node
// with its data under the state dir, gives Glance and Cinder the monitor's address and
// Cinder quotas as large as the storage, and keeps what the spec had.
func TestApply(t *testing.T) {
	site := Site{NodeName: "node1", StateDir: "/var/lib/osd", PublicIP: "10.0.0.5", KeystoneURL: "http://10.0.0.5:30500/v3", CinderURL: "http://10.0.0.5:30776"}
	for _, tt := range []struct {
		backend      string
		size         int64
		ceph, cinder bool
		quota        int64
	}{
		{backend: "ceph", size: 10 * gib, ceph: true, cinder: true, quota: 10},
		{backend: "lvm", size: 20 * gib, ceph: false, cinder: true, quota: 20},
		{backend: "none", ceph: false, cinder: false, quota: 1},
	} {
		t.Run(tt.backend, func(t *testing.T) {
			spec := deploy.DeploymentSpec{Images: map[string]string{}, Services: map[string]deploy.ServiceSpec{
				"glance": {Overrides: map[string]any{"persistence": map[string]any{"hostPath": "/x"}}}}}
			if err := Apply(&spec, Choice{Backend: tt.backend, Size: tt.size}, site); err != nil {
				t.Fatal(err)
			}
			cat := deploy.DefaultCatalog()
			svc := func(n string) deploy.Service { s, _ := cat.Service(n); return s }
			if spec.Features.Storage != tt.backend || spec.ServiceEnabled(svc("ceph")) != tt.ceph || spec.ServiceEnabled(svc("cinder")) != tt.cinder {
				t.Errorf("spec storage %s ceph %v cinder %v, want %s %v %v", spec.Features.Storage, spec.ServiceEnabled(svc("ceph")), spec.ServiceEnabled(svc("cinder")), tt.backend, tt.ceph, tt.cinder)
			}
			if !spec.ServiceEnabled(svc("glance")) {
				t.Errorf("glance disabled by Apply")
			}
			ceph := spec.Services["ceph"].Overrides
			if ceph["node"] != "node1" || ceph["osd"].(map[string]any)["blockSizeBytes"] != tt.size ||
				ceph["persistence"].(map[string]any)["hostPath"] != "/var/lib/osd/volumes/ceph" {
				t.Errorf("ceph overrides = %v, want node1, %d bytes, under the state dir", ceph, tt.size)
			}
			cinder := spec.Services["cinder"].Overrides
			if cinder["ceph"].(map[string]any)["monHost"] != "10.0.0.5" || cinder["endpoints"].(map[string]any)["public"] != site.CinderURL {
				t.Errorf("cinder overrides = %v, want the monitor and public endpoint on 10.0.0.5", cinder)
			}
			q := cinder["conf"].(map[string]any)["cinder"].(map[string]any)["DEFAULT"].(map[string]any)
			if q["quota_gigabytes"] != tt.quota {
				t.Errorf("cinder quota_gigabytes = %v, want %d (the storage in GiB, at least 1)", q["quota_gigabytes"], tt.quota)
			}
			glance := spec.Services["glance"].Overrides
			if _, has := glance["ceph"]; has != tt.ceph || glance["persistence"] == nil {
				t.Errorf("glance overrides = %v: want its own kept and the monitor only with Ceph", glance)
			}
			if _, has := spec.Images["ceph"]; has != tt.ceph {
				t.Errorf("spec.images ceph present = %v, want %v", has, tt.ceph)
			}
		})
	}
}
