package deployment

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"

	bimages "github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/daemon/deploy"
	"github.com/osdcloud/osd/daemon/state"
)

// PublicURL is the public address of service's port (as the catalog decides it) on this
// node, with the port's path; "" when the catalog has no such port.
func (s *Service) PublicURL(service, port string) string {
	return s.portURL(service, port, func(p deploy.Port) string { return p.Path })
}

// probeURL is what Answering GETs for a service's port: its public address with the
// port's ProbePath.
func (s *Service) probeURL(service, port string) string {
	return s.portURL(service, port, deploy.Port.ProbePath)
}

// portURL is the address of service's port on this node with path(port); "" when the
// catalog has no such port.
func (s *Service) portURL(service, port string, path func(deploy.Port) string) string {
	svc, ok := deploy.DefaultCatalog().Service(service)
	if !ok {
		return ""
	}
	p, ok := svc.Port(port)
	if !ok {
		return ""
	}
	return "http://" + net.JoinHostPort(s.st.Cfg.PublicIP(), fmt.Sprint(p.NodePort)) + path(p)
}

// KeystonePublicURL is Keystone's address for clients on the host and the network.
func (s *Service) KeystonePublicURL() string { return s.PublicURL("keystone", "public") }

// Spec is the OpenStackDeployment osd asks for on this host.
func (s *Service) Spec() (deploy.DeploymentSpec, error) {
	rel, err := s.st.Release(context.Background())
	if err != nil {
		return deploy.DeploymentSpec{}, err
	}
	spec := deploy.DeploymentSpec{Profile: "single-node", Release: rel.Name, Images: map[string]string{}}
	for _, n := range DeployImages(deploy.DefaultCatalog()) {
		r, ok := bimages.RecipeIn(rel, n)
		if !ok {
			return spec, fmt.Errorf("no recipe for image %s", n)
		}
		spec.Images[n] = r.Ref
	}
	authURI := map[string]any{"keystone_authtoken": map[string]any{"www_authenticate_uri": s.KeystonePublicURL()}}
	// Data lives under the state dir, so osd reset removes it with everything else.
	volume := func(svc string) map[string]any {
		return map[string]any{"hostPath": filepath.Join(s.st.Cfg.StateDir, "volumes", svc)}
	}
	public := func(svc string) map[string]any { return map[string]any{"public": s.PublicURL(svc, "public")} }
	spec.Services = map[string]deploy.ServiceSpec{
		"mariadb":   {Overrides: map[string]any{"persistence": volume("mariadb")}},
		"rabbitmq":  {Overrides: map[string]any{"persistence": volume("rabbitmq")}},
		"keystone":  {Overrides: map[string]any{"endpoints": public("keystone")}},
		"glance":    {Overrides: map[string]any{"endpoints": public("glance"), "conf": map[string]any{"glance": authURI}, "persistence": volume("glance")}},
		"placement": {Overrides: map[string]any{"endpoints": public("placement"), "conf": map[string]any{"placement": authURI}}},
		"ovn":       {Overrides: map[string]any{"persistence": volume("ovn")}},
		"heat": {Overrides: map[string]any{
			"endpoints": map[string]any{"heat": public("heat"), "cfn": map[string]any{"public": s.PublicURL("heat", "cfn")}},
			"conf":      map[string]any{"heat": authURI},
		}},
		"nova": {Overrides: map[string]any{
			"endpoints": public("nova"),
			"virtType":  s.virtType(),
			"conf": map[string]any{
				"nova":         map[string]any{"vnc": map[string]any{"novncproxy_base_url": s.PublicURL("nova", "novnc")}},
				"controlPlane": authURI,
			},
		}},
		"neutron": {Overrides: map[string]any{
			"endpoints":     public("neutron"),
			"conf":          map[string]any{"neutron": authURI},
			"metadataAgent": map[string]any{"stateHostPath": filepath.Join(s.st.Cfg.StateDir, "volumes", "neutron-metadata")},
		}},
	}
	SetNodePorts(spec.Services, deploy.DefaultCatalog())
	applyReleaseValues(spec.Services, rel)
	return spec, s.storage.ApplySpec(context.Background(), &spec, s.KeystonePublicURL(), s.PublicURL("cinder", "public"))
}

// DeployImages are the images the services c enables by default run from, sorted (pure):
// the base deployment's, which the image resource makes ready (images.DeployImages; a
// daemon test checks that the two agree). The storage backend adds its own.
func DeployImages(c deploy.Catalog) []string {
	var out []string
	for _, svc := range c.Services {
		if svc.Enabled {
			out = append(out, svc.Images...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// SetNodePorts puts every catalog port's NodePort into its service's overrides, at the
// port's values path (pure): the catalog is the one place NodePorts are decided.
func SetNodePorts(services map[string]deploy.ServiceSpec, cat deploy.Catalog) {
	for _, svc := range cat.Services {
		for _, p := range svc.Ports {
			ss := services[svc.Name]
			if ss.Overrides == nil {
				ss.Overrides = map[string]any{}
			}
			setPath(ss.Overrides, strings.Split(p.Values, "."), p.NodePort)
			services[svc.Name] = ss
		}
	}
}

// setPath sets m[path...] = v, making the maps on the way.
func setPath(m map[string]any, path []string, v any) {
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

// virtType is the hypervisor type preflight chose for this host (kvm with hardware
// virtualization, else qemu), as recorded by the last converge.
func (s *Service) virtType() string {
	v, ok, err := s.st.Get(context.Background(), state.KeyVirtType)
	if err != nil || !ok || v == "" {
		return "qemu"
	}
	return v
}
