package deployment

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/osdcloud/osd/charts"
	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/deploy"
	"github.com/osdcloud/osd/daemon/rest"
)

// Endpoints are the deployment routes:
//
//	GET /1.0/deployment                    -> DeploymentStatus
//	GET /1.0/deployment/values/{service}   -> the service's rendered Helm values
func (s *Service) Endpoints() []rest.Endpoint {
	return []rest.Endpoint{
		{Path: "deployment", Get: rest.Action{Handler: s.getDeployment}},
		{Path: "deployment/values/{service}", Get: rest.Action{Handler: s.getRenderedValues}},
	}
}

// getDeployment answers the OpenStackDeployment's status: each release and each workload
// with the reason it is not ready.
func (s *Service) getDeployment(r *http.Request) rest.Response {
	if !s.st.Node.Running() {
		return rest.ErrorResponse(rest.Errorf(rest.ErrNotReady, "the embedded Kubernetes is not running: run osd init"))
	}
	kc, err := s.st.Node.Clients()
	if err != nil {
		return rest.ErrorResponse(err)
	}
	dep, err := deploy.Deployments{Client: kc.Dynamic}.Get(r.Context(), deploy.Namespace, deploy.DefaultName)
	if apierrors.IsNotFound(errors.Unwrap(err)) || apierrors.IsNotFound(err) {
		return rest.ErrorResponse(rest.Errorf(rest.ErrNotFound, "no OpenStack deployment yet: osd init creates it"))
	}
	if err != nil {
		return rest.ErrorResponse(err)
	}
	out, err := WireStatus(dep.Status)
	if err != nil {
		return rest.ErrorResponse(err)
	}
	if out.StateNodes, err = Placement(r.Context(), kc.Kube); err != nil {
		return rest.ErrorResponse(err)
	}
	return rest.SyncResponse(MarkUnanswered(out, s.Answering(r.Context(), enabledServices(dep.Spec))))
}

// WireStatus is the deployment status as the API shows it (pure: the two types have the
// same JSON shape; a test keeps them so).
func WireStatus(st deploy.DeploymentStatus) (api.DeploymentStatus, error) {
	var out api.DeploymentStatus
	b, err := json.Marshal(st)
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return out, fmt.Errorf("deployment status: %w", err)
	}
	return out, nil
}

// getRenderedValues answers the final Helm values of one service: chart defaults, profile,
// features, common and per-service overrides merged (secrets are never part of values).
// It uses the stored OpenStackDeployment when there is one, else what osd init would ask for.
func (s *Service) getRenderedValues(r *http.Request) rest.Response {
	name := rest.Var(r, "service")
	cat := deploy.DefaultCatalog()
	if _, ok := cat.Service(name); !ok {
		var names []string
		for _, svc := range cat.Services {
			names = append(names, svc.Name)
		}
		return rest.ErrorResponse(rest.Errorf(rest.ErrNotFound, "no service %q: the catalog's services are %s", name, strings.Join(names, ", ")))
	}
	spec, err := s.Spec()
	if err != nil {
		return rest.ErrorResponse(err)
	}
	if s.st.Node.Running() {
		if kc, err := s.st.Node.Clients(); err == nil {
			if dep, err := (deploy.Deployments{Client: kc.Dynamic}).Get(r.Context(), deploy.Namespace, deploy.DefaultName); err == nil {
				spec = dep.Spec
			}
		}
	}
	c := &deploy.Controller{Charts: charts.FS}
	vals, err := c.RenderedValues(spec, name)
	if err != nil {
		return rest.ErrorResponse(rest.Errorf(rest.ErrNotFound, "%v", err))
	}
	return rest.SyncResponse(vals)
}
