package members

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/osdcloud/osd/daemon/k3s"
)

// admissionInterval is how often the admitted node names are rewritten without an event
// (an agent token or a join token that expired meanwhile).
var admissionInterval = time.Minute

// syncAdmission rewrites the node names a kubelet may register under
// (k3s.SyncNodeAdmission): this server, every member that is not barred, and the nodes
// whose join is under way but revoking's (its join token is being revoked). It deletes
// the agent tokens of the others.
func (s *Service) syncAdmission(ctx context.Context, cs kubernetes.Interface, revoking string) error {
	s.admissionMu.Lock()
	defer s.admissionMu.Unlock()
	recs, err := s.st.DB.ListMembers(ctx)
	if err != nil {
		return err
	}
	names := []string{s.st.Cfg.NodeName}
	for _, m := range recs {
		names = append(names, m.Name)
	}
	toks, err := s.st.DB.ListTokens(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	pending := map[string]time.Time{}
	for _, t := range toks {
		if t.Live(now) && t.Name != revoking {
			pending[t.Name] = t.CreatedAt
		}
	}
	if err := k3s.SyncNodeAdmission(ctx, cs, names, pending, now); err != nil {
		return fmt.Errorf("admit nodes: %w", err)
	}
	return nil
}

// KeepAdmission writes the admitted node names as soon as this server's Kubernetes
// answers (a cloud made before the policy existed gets its list at its first start
// with it), then every admissionInterval, until ctx ends. It does nothing on a node that
// did not run osd init (a joined member: the cluster's server keeps the list).
func (s *Service) KeepAdmission(ctx context.Context) {
	wait := 5 * time.Second
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if !s.st.Initialized(ctx) || !s.st.Node.Running() {
			continue
		}
		cs, err := s.adminClient()
		if err == nil {
			err = s.syncAdmission(ctx, cs, "")
		}
		switch {
		case err != nil && ctx.Err() == nil:
			if !failing {
				slog.Warn("cannot write the admitted node names yet; retrying", "err", err)
			}
			failing, wait = true, 5*time.Second
		case err == nil:
			if failing {
				slog.Info("admitted node names written")
			}
			failing, wait = false, admissionInterval
		}
	}
}
