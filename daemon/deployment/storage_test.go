package deployment

import (
	"context"
	"strings"
	"testing"

	"github.com/osdcloud/osd/bootstrap/preflight"
	"github.com/osdcloud/osd/charts"
	"github.com/osdcloud/osd/daemon/deploy"
	"github.com/osdcloud/osd/daemon/deploy/helmclient"
	"github.com/osdcloud/osd/daemon/state"
	"github.com/osdcloud/osd/daemon/storage"
	"github.com/osdcloud/osd/daemon/store"
)

// TestSpecRendersPerStorageBackend renders every service the deployment enables, for each
// storage backend, through the controller's layering and Helm: what osd init would
// install must render, with Ceph and Cinder enabled as the backend says.
func TestSpecRendersPerStorageBackend(t *testing.T) {
	ctx := context.Background()
	for _, backend := range []string{"ceph", "lvm", "none"} {
		t.Run(backend, func(t *testing.T) {
			db, err := store.OpenMemory(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			st := &state.State{DB: db, Cfg: state.Config{StateDir: t.TempDir(), NodeName: "node1", NodeIP: "10.0.0.5"}}
			dec := preflight.Decisions{StorageBackend: backend}
			sto := storage.New(st)
			if err := sto.Decide(ctx, &dec, preflight.Facts{DiskFreeBytes: 40 << 30}); err != nil {
				t.Fatal(err)
			}
			spec, err := New(st, Deps{Storage: sto}).Spec()
			if err != nil {
				t.Fatal(err)
			}
			if got := spec.Services["cinder"].Overrides["endpoints"].(map[string]any)["public"]; got != "http://10.0.0.5:30776" {
				t.Errorf("cinder's public endpoint = %v, want http://10.0.0.5:30776 (the catalog's port)", got)
			}
			c := &deploy.Controller{Charts: charts.FS}
			enabled := map[string]bool{}
			for _, svc := range deploy.DefaultCatalog().Services {
				if !spec.ServiceEnabled(svc) {
					continue
				}
				enabled[svc.Name] = true
				vals, err := c.RenderedValues(spec, svc.Name)
				if err != nil {
					t.Fatalf("%s: values: %v", svc.Name, err)
				}
				ch, _, err := helmclient.LoadChart(charts.FS, svc.Chart)
				if err != nil {
					t.Fatal(err)
				}
				out, err := helmclient.Template(ctx, ch, svc.Namespace, svc.Name, deploy.HelmValues(vals, ch.Values))
				if err != nil {
					t.Fatalf("%s (%s): %v", svc.Name, backend, err)
				}
				if svc.Name == "glance" && strings.Contains(out, "rbd_store_pool") != (backend == "ceph") {
					t.Errorf("glance with %s: RBD store rendered = %v", backend, backend != "ceph")
				}
			}
			if enabled["ceph"] != (backend == "ceph") || enabled["cinder"] != (backend != "none") {
				t.Errorf("enabled with %s: ceph %v cinder %v", backend, enabled["ceph"], enabled["cinder"])
			}
		})
	}
}
