package storage

import (
	"context"
	"fmt"
	"path/filepath"

	bimages "github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/deploy"
)

// Site is what the storage part of the deployment spec needs to know of this node.
type Site struct {
	NodeName    string
	StateDir    string // Ceph's data goes under StateDir/volumes/ceph (osd reset removes it)
	PublicIP    string // the Ceph monitor's address, for Glance, Cinder and nova-compute
	KeystoneURL string // Keystone's public address (Cinder's www_authenticate_uri)
	CinderURL   string // Cinder's public endpoint
	// Release is the OpenStack release the cloud runs (its Ceph image; zero: the default).
	Release bimages.Release
}

func (s Site) release() bimages.Release {
	if s.Release.Name == "" {
		return bimages.DefaultRelease()
	}
	return s.Release
}

// ApplySpec adds this host's block storage, as recorded, to spec (Apply): keystoneURL is
// Keystone's public address, cinderURL Cinder's public endpoint.
func (s *Service) ApplySpec(ctx context.Context, spec *deploy.DeploymentSpec, keystoneURL, cinderURL string) error {
	cfg := s.st.Cfg
	rel, err := s.st.Release(ctx)
	if err != nil {
		return err
	}
	site := Site{NodeName: cfg.NodeName, StateDir: cfg.StateDir, PublicIP: cfg.PublicIP(), KeystoneURL: keystoneURL, CinderURL: cinderURL, Release: rel}
	return Apply(spec, s.Current(ctx), site)
}

// Apply adds block storage to spec (pure): features.storage, Ceph (on this node, its
// data under the state dir, the OSD sized) and Cinder enabled for the backend, the
// monitor's address for Glance and Cinder, and Cinder's quotas as large as the storage.
func Apply(spec *deploy.DeploymentSpec, c Choice, site Site) error {
	spec.Features.Storage = c.Backend
	ceph := c.Backend == api.StorageCeph
	cinder := ceph || c.Backend == api.StorageLVM
	if ceph {
		r, ok := bimages.RecipeIn(site.release(), "ceph")
		if !ok {
			return fmt.Errorf("no recipe for image ceph")
		}
		if spec.Images == nil {
			spec.Images = map[string]string{}
		}
		spec.Images["ceph"] = r.Ref
	}
	if spec.Services == nil {
		spec.Services = map[string]deploy.ServiceSpec{}
	}
	override := func(name string, enabled *bool, o map[string]any) {
		s := spec.Services[name]
		s.Enabled = enabled
		s.Overrides = deploy.Merge(s.Overrides, o)
		spec.Services[name] = s
	}
	gib := max(c.Size>>30, 1)
	override("ceph", &ceph, map[string]any{
		"node":        site.NodeName,
		"persistence": map[string]any{"hostPath": filepath.Join(site.StateDir, "volumes", "ceph")},
		"osd":         map[string]any{"blockSizeBytes": c.Size},
	})
	override("cinder", &cinder, map[string]any{
		"endpoints": map[string]any{"public": site.CinderURL},
		"ceph":      map[string]any{"monHost": site.PublicIP},
		"lvm":       map[string]any{"node": site.NodeName},
		"conf": map[string]any{"cinder": map[string]any{
			"keystone_authtoken": map[string]any{"www_authenticate_uri": site.KeystoneURL},
			"DEFAULT":            map[string]any{"quota_gigabytes": gib, "quota_backup_gigabytes": gib},
		}},
	})
	if ceph {
		override("glance", spec.Services["glance"].Enabled, map[string]any{"ceph": map[string]any{"monHost": site.PublicIP}})
	}
	return nil
}
