package deployment

import (
	"context"
	"fmt"
	"os"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/openstack"
	"github.com/osdcloud/osd/daemon/rest"
)

// CloudName is the cloud in the clouds.yaml the openstack step writes.
const CloudName = "osd"

// AdminCredentials reads the admin credentials the openstack step wrote (clouds.yaml).
func (s *Service) AdminCredentials() (openstack.Credentials, error) {
	creds, err := openstack.LoadCloudsYAML(s.st.Cfg.CloudsPath(), CloudName)
	if os.IsNotExist(err) {
		return creds, fmt.Errorf("no admin credentials yet (%s): the openstack step of osd init writes them", s.st.Cfg.CloudsPath())
	}
	return creds, err
}

// CloudClient logs in as admin, or says clearly why osd init has not got that far.
func (s *Service) CloudClient(ctx context.Context) (*openstack.Client, error) {
	creds, err := s.AdminCredentials()
	if err != nil {
		if st := s.init.Snapshot(); st.State == api.ConvergeRunning {
			step := ""
			if n := len(st.Steps); n > 0 {
				step = " (step " + st.Steps[n-1].Step + ")"
			}
			return nil, rest.Errorf(rest.ErrNotReady, "osd init is still running%s: wait until it finishes (osd status)", step)
		}
		return nil, rest.Errorf(rest.ErrNotReady, "osd init has not finished on this host (%v): run osd init", err)
	}
	c, err := openstack.Authenticate(ctx, creds)
	if err != nil {
		return nil, rest.Errorf(rest.ErrNotReady, "log in to Keystone: %v", err)
	}
	return c, nil
}

// ensureDayOne is the converge step after openstack: the guest test image, flavors,
// the external and tenant networks, the router, the admin project's default security
// group rules, the test images and osd's keypair (its private key in the state dir), made
// idempotently by name (a second run changes nothing). Parts whose service is not deployed
// are skipped and said so in the detail.
func (s *Service) ensureDayOne(ctx context.Context, detail func(string)) (bool, string, error) {
	creds, err := s.AdminCredentials()
	if err != nil {
		return false, "", err
	}
	cfg := openstack.DayOneConfig{Credentials: creds, Client: s.loggedIn.get(creds), CacheDir: s.st.Cfg.CacheDir, KeyFile: openstack.KeyFile(s.st.Cfg.StateDir), Progress: detail}
	if h, err := s.st.Host(ctx); err != nil {
		return false, "", err
	} else if h.External != nil {
		ext := h.External
		if ext.Interface != "" {
			cfg.NoExternal = true
		} else {
			cfg.ExternalCIDR, cfg.ExternalGateway = ext.CIDR, ext.GatewayIP
		}
	}
	return openstack.EnsureDayOne(ctx, cfg)
}
