package converge

import (
	"context"
	"encoding/json"
	"net"
	"net/http"

	"github.com/osdcloud/osd/bootstrap/preflight"
	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/hostplan"
	"github.com/osdcloud/osd/daemon/rest"
	"github.com/osdcloud/osd/daemon/state"
	"github.com/osdcloud/osd/daemon/store"
	"github.com/osdcloud/osd/netsetup"
)

// Endpoints are the converge routes:
//
//	POST /1.0/init        InitRequest -> 202, the run's operation (metadata: InitState)
//	GET  /1.0/init        -> InitState of the current or last run
//	GET  /1.0/preflight   -> PreflightReport
//	GET  /1.0/journal     -> the most recent journaled steps
func (s *Service) Endpoints() []rest.Endpoint {
	return []rest.Endpoint{
		{Path: "init", Get: rest.Action{Handler: func(*http.Request) rest.Response { return rest.SyncResponse(s.Snapshot()) }},
			Post: rest.Action{Handler: s.postInit}},
		{Path: "preflight", Get: rest.Action{Handler: s.getPreflight}},
		{Path: "journal", Get: rest.Action{Handler: s.getJournal}},
	}
}

// postInit records that this host is to be an osd node and starts converging it.
func (s *Service) postInit(r *http.Request) rest.Response {
	var req api.InitRequest
	if err := rest.DecodeJSON(r, &req, 4096); err != nil {
		return rest.ErrorResponse(err)
	}
	ctx := r.Context()
	h, err := s.st.Host(ctx)
	if err != nil {
		return rest.ErrorResponse(err)
	}
	if h.Join != nil && h.Join.State != state.JoinRemoved {
		how := map[string]string{state.JoinJoining: "joining", state.JoinMember: "a member of"}[h.Join.State]
		return rest.ErrorResponse(rest.Errorf(rest.ErrConflict, "this host is %s a cluster (osd join): osd init would make it a second, separate cloud; run osd reset first to leave", how))
	}
	if err := s.storage.CheckRequest(ctx, req, probeDecisions(s.st.Cfg)); err != nil {
		return rest.ErrorResponse(err)
	}
	rel, err := releaseFor(h, req.Release)
	if err != nil {
		return rest.ErrorResponse(err)
	}
	goal := state.GoalOpenStack
	if req.KubernetesOnly {
		goal = state.GoalKubernetes
	}
	var ext *netsetup.ExternalNetwork
	if req.ExternalInterface != "" || req.ExternalCIDR != "" {
		e, err := s.checkExternal(ctx, h, req)
		if err != nil {
			return rest.ErrorResponse(err)
		}
		ext = &e
	}
	if req.TunnelInterface != "" {
		if err := hostplan.CheckTunnelInterface(req.TunnelInterface); err != nil {
			return rest.ErrorResponse(err)
		}
	}
	// Everything checked: the request goes into the host record at once.
	err = s.st.UpdateHost(ctx, func(h *store.Host) error {
		if ext != nil {
			h.ExternalWanted = state.Network(*ext)
		}
		if req.TunnelInterface != "" {
			h.TunnelInterface = req.TunnelInterface
		}
		h.Goal = goal
		s.storage.RecordRequest(h, req)
		h.Release = rel.Name // from the first init on, the cloud's release
		h.Initialized = true
		return nil
	})
	if err != nil {
		return rest.ErrorResponse(err)
	}
	op := s.Start()
	return rest.AsyncResponse(rest.APIPrefix+"/operations/"+op.ID, s.Snapshot())
}

// checkExternal checks the external network osd init asks for against this host (h its
// record) and returns it normalized; it refuses to change the one a host already has.
func (s *Service) checkExternal(ctx context.Context, h store.Host, req api.InitRequest) (netsetup.ExternalNetwork, error) {
	ext, err := netsetup.ExternalNetwork{Interface: req.ExternalInterface, CIDR: req.ExternalCIDR}.Normalize()
	if err != nil {
		return ext, rest.Errorf(rest.ErrBadRequest, "%v", err)
	}
	if ext.Interface != "" {
		if _, err := net.InterfaceByName(ext.Interface); err != nil {
			return ext, rest.Errorf(rest.ErrBadRequest, "external interface %q: %v (ip link lists the host's interfaces)", ext.Interface, err)
		}
	}
	if cur, err := hostplan.WantedExternal(s.st.Cfg, h); err == nil && cur != ext && h.External != nil {
		return ext, rest.Errorf(rest.ErrConflict, "this host's external network is already %s %s%s: changing it needs osd reset first", cur.Bridge, cur.CIDR, cur.Interface)
	}
	return ext, nil
}

func (s *Service) getPreflight(r *http.Request) rest.Response {
	rep, err := preflight.Run(r.Context(), hostplan.PreflightConfig(s.st.Cfg), preflight.DefaultRequirements())
	if err != nil && len(rep.Findings) == 0 {
		return rest.ErrorResponse(err)
	}
	out := api.PreflightReport{Decisions: WireDecisions(rep.Decisions), Findings: WireFindings(rep.Findings), Failed: rep.Failed}
	if b, err := json.Marshal(rep.Facts); err == nil {
		json.Unmarshal(b, &out.Facts)
	}
	return rest.SyncResponse(out)
}

func (s *Service) getJournal(r *http.Request) rest.Response {
	entries, err := s.st.DB.RecentJournal(r.Context(), 200)
	if err != nil {
		return rest.ErrorResponse(err)
	}
	return rest.SyncResponse(entries)
}

// probeDecisions probes this host and says what preflight would decide (osd init
// --storage lvm is refused where LVM cannot serve volumes).
func probeDecisions(cfg state.Config) func(context.Context) preflight.Decisions {
	return func(ctx context.Context) preflight.Decisions {
		f, _ := preflight.Probe(ctx, hostplan.PreflightConfig(cfg))
		return preflight.Decide(f)
	}
}
