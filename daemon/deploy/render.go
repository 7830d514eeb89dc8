package deploy

import "fmt"

// profileLayer is what a profile changes for one service.
func profileLayer(profile string, svc Service) (map[string]any, error) {
	switch profile {
	case "", ProfileSingleNode:
		return map[string]any{"replicas": 1}, nil
	case ProfileHA:
		switch svc.Name {
		case "mariadb", "rabbitmq":
			// Clustered MariaDB (Galera) and RabbitMQ are not built yet: one replica each.
			return map[string]any{"replicas": 1}, nil
		}
		return map[string]any{"replicas": 3}, nil
	}
	return nil, fmt.Errorf("unknown profile %q (want %s or %s)", profile, ProfileSingleNode, ProfileHA)
}

// featuresLayer hands the selected backends to every chart under .features.
func featuresLayer(f Features) (map[string]any, error) {
	switch f.Storage {
	case "", StorageCeph, StorageLVM, "file", "none":
	default:
		return nil, fmt.Errorf("unknown storage backend %q (want ceph, lvm, file or none)", f.Storage)
	}
	switch f.Network {
	case "", "ovn":
	default:
		return nil, fmt.Errorf("unknown network backend %q (want ovn)", f.Network)
	}
	storage, network := f.Storage, f.Network
	if storage == "" {
		storage = "file"
	}
	if network == "" {
		network = "ovn"
	}
	return map[string]any{"features": map[string]any{"storage": storage, "network": network, "tls": f.TLS}}, nil
}

// imagesLayer hands the service's image references to its chart under .images.
func imagesLayer(images map[string]string, svc Service) (map[string]any, error) {
	out := map[string]any{}
	for _, name := range svc.Images {
		ref, ok := images[name]
		if !ok || ref == "" {
			return nil, fmt.Errorf("image %q for %s is not set in spec.images", name, svc.Name)
		}
		out[name] = ref
	}
	return map[string]any{"images": out}, nil
}

// releaseLayer hands the OpenStack release (zed in specs from before releases were
// recorded) to every chart as openstackRelease.
func releaseLayer(release string) map[string]any {
	if release == "" {
		release = "zed"
	}
	return map[string]any{"openstackRelease": release}
}

// Render returns the values of one service: chart defaults <- images <- release <- profile
// <- features <- common overrides <- per-service overrides (see Merge for the rules).
func Render(spec DeploymentSpec, svc Service, chartDefaults map[string]any) (map[string]any, error) {
	img, err := imagesLayer(spec.Images, svc)
	if err != nil {
		return nil, err
	}
	prof, err := profileLayer(spec.Profile, svc)
	if err != nil {
		return nil, err
	}
	feat, err := featuresLayer(spec.Features)
	if err != nil {
		return nil, err
	}
	return Merge(chartDefaults, img, releaseLayer(spec.Release), prof, feat, spec.Common, spec.Services[svc.Name].Overrides), nil
}

// HelmValues returns the values to hand to Helm for rendered values: rendered plus an
// explicit nil for every key of the chart defaults that rendering deleted, because Helm
// coalesces the chart defaults under what it is given and would otherwise bring them back.
func HelmValues(rendered, chartDefaults map[string]any) map[string]any {
	out := Merge(rendered)
	addDeletions(out, chartDefaults)
	return out
}

func addDeletions(out, defaults map[string]any) {
	for k, dv := range defaults {
		ov, present := out[k]
		if !present {
			out[k] = nil
			continue
		}
		dm, dIsMap := dv.(map[string]any)
		om, oIsMap := ov.(map[string]any)
		if dIsMap && oIsMap {
			addDeletions(om, dm)
		}
	}
}
