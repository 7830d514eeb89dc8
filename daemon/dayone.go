package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/osdcloud/osd/bootstrap/cloud"
	"github.com/osdcloud/osd/netsetup"
)

// cloudName is the cloud in the clouds.yaml the openstack step writes.
const cloudName = "osd"

// adminCredentials reads the admin credentials the openstack step wrote (clouds.yaml).
func (d *Daemon) adminCredentials() (cloud.Credentials, error) {
	creds, err := cloud.LoadCloudsYAML(d.cloudsPath(), cloudName)
	if os.IsNotExist(err) {
		return creds, fmt.Errorf("no admin credentials yet (%s): the openstack step of osd init writes them", d.cloudsPath())
	}
	return creds, err
}

// ensureDayOne is the converge step after openstack: the guest test image, flavors,
// the external and tenant networks, the router, the admin project's default security
// group rules and the test images, made idempotently by name (a second run changes
// nothing). Parts whose service is not deployed are skipped and said so in the detail.
func (d *Daemon) ensureDayOne(ctx context.Context) (bool, string, error) {
	creds, err := d.adminCredentials()
	if err != nil {
		return false, "", err
	}
	cfg := cloud.DayOneConfig{Credentials: creds, CacheDir: d.cfg.CacheDir,
		Progress: func(s string) { d.conv.update(func(st *InitState) { st.Detail = s }) }}
	if v, ok, err := d.db.GetConfig(ctx, configExternal); err != nil {
		return false, "", err
	} else if ok {
		var ext netsetup.ExternalNetwork
		if err := json.Unmarshal([]byte(v), &ext); err != nil {
			return false, "", fmt.Errorf("stored external network: %w", err)
		}
		if ext.Interface != "" {
			cfg.NoExternal = true
		} else {
			cfg.ExternalCIDR, cfg.ExternalGateway = ext.CIDR, ext.GatewayIP
		}
	}
	return cloud.EnsureDayOne(ctx, cfg)
}
