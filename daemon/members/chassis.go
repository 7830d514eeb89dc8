package members

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/osdcloud/osd/daemon/deploy"
	"github.com/osdcloud/osd/daemon/ovnchassis"
	"github.com/osdcloud/osd/daemon/rest"
	"github.com/osdcloud/osd/netsetup/ovnpki"
	"github.com/osdcloud/osd/netsetup/ovnsb"
)

// SignChassis signs member's OVN chassis certificate for systemID. A member names its
// own chassis (its Open vSwitch's system-id), so a name the southbound database already
// gives a chassis of another host is refused: one member cannot take over another's
// chassis. The database must answer (for a joined member, OVN runs already); the node
// holding the CA signs its own chassis without asking (SignLocalChassis).
func (s *Service) SignChassis(ctx context.Context, member, systemID, csrPEM string) ([]byte, []byte, error) {
	if err := ovnpki.ValidChassisName(systemID); err != nil {
		return nil, nil, rest.Errorf(rest.ErrBadRequest, "%w", err)
	}
	cs, err := s.adminClient()
	if err != nil {
		return nil, nil, rest.Errorf(rest.ErrNotReady, "kubernetes: %w", err)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sb, err := connectSB(sctx, cs)
	if err != nil {
		return nil, nil, rest.Errorf(rest.ErrNotReady, "the OVN southbound database cannot say whose chassis %s is: %w", systemID, err)
	}
	list, err := sb.List(sctx)
	sb.Close()
	if err != nil {
		return nil, nil, rest.Errorf(rest.ErrNotReady, "%w", err)
	}
	if err := chassisTaken(list, member, systemID); err != nil {
		return nil, nil, rest.Errorf(rest.ErrConflict, "%w", err)
	}
	cert, ca, err := s.localSigner()(ctx, systemID, csrPEM)
	if err != nil {
		return nil, nil, rest.Errorf(rest.ErrBadRequest, "%w", err)
	}
	return cert, ca, nil
}

// chassisTaken says whether the southbound database's chassis give systemID to a host
// other than member, or to none recorded (pure): only a name no chassis has yet, or
// member's own, is free.
func chassisTaken(list []ovnsb.ChassisInfo, member, systemID string) error {
	for _, c := range list {
		if c.Name == systemID && c.Hostname != member {
			return fmt.Errorf("chassis %s belongs to host %s, not %s", systemID, c.Hostname, member)
		}
	}
	return nil
}

// localSigner signs with the OVN CA the deploy controller keeps in Kubernetes.
func (s *Service) localSigner() ovnchassis.Signer {
	return ovnchassis.SignWith(func(ctx context.Context) (*ovnpki.CA, error) {
		cs, err := s.adminClient()
		if err != nil {
			return nil, err
		}
		return deploy.LoadOVNCA(ctx, cs, deploy.Namespace)
	}, time.Now)
}

// ChassisCertDir is this host's chassis certificate directory (charts/ovn mounts it).
func (s *Service) ChassisCertDir() string {
	return ovnchassis.Dir
}

// RunChassisCert keeps this host's OVN chassis certificate current while ctx lasts:
// every 30 seconds until it holds one, then every 6 hours. The node that ran osd init
// signs with the OVN CA itself; a joined member asks the cluster through remote. A host
// without Open vSwitch (no chassis) just waits.
func (s *Service) RunChassisCert(ctx context.Context, remote ovnchassis.Signer) {
	failures := 0
	for {
		wait := 6 * time.Hour
		if err := s.chassisCertOnce(ctx, remote); errors.Is(err, ovnchassis.ErrNoOVS) {
			wait = 30 * time.Second // no chassis here (yet)
			slog.Debug("OVN chassis certificate", "err", err)
		} else if err != nil {
			wait = 30 * time.Second
			if failures++; failures%20 == 1 {
				slog.Info("OVN chassis certificate not yet issued; retrying", "err", err)
			}
		} else {
			failures = 0
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func (s *Service) chassisCertOnce(ctx context.Context, remote ovnchassis.Signer) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	id, err := ovnchassis.SystemID(cctx)
	if err != nil {
		return err
	}
	sign := remote
	if s.st.Initialized(cctx) {
		sign = s.localSigner()
	}
	if sign == nil {
		return errors.New("this node neither holds the OVN CA nor is a member")
	}
	wrote, err := ovnchassis.Ensure(cctx, s.ChassisCertDir(), id, sign, time.Now())
	if wrote {
		slog.Info("OVN chassis certificate issued", "chassis", id, "dir", s.ChassisCertDir())
	}
	return err
}
