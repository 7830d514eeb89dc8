package members

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/deploy"
	"github.com/osdcloud/osd/netsetup/ovnsb"
)

// MaintenanceAnnotation marks a node osd cluster maintenance put into maintenance.
const MaintenanceAnnotation = "osd.cloud/maintenance"

// maintenanceReason is the disabled reason Nova shows for a node in maintenance.
const maintenanceReason = "osd cluster maintenance"

// Maintenance puts node name into maintenance (on: its nova-compute disabled, so the
// scheduler places no new server there, then the node cordoned and annotated) or takes
// it out (off: the same undone, nova-compute first enabled again).
func (s *Service) Maintenance(ctx context.Context, name string, on bool) error {
	cs, err := s.adminClient()
	if err != nil {
		return err
	}
	if _, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	if on {
		if err := s.disableCompute(ctx, name, maintenanceReason, false); err != nil {
			return err
		}
	} else if err := s.enableCompute(ctx, name); err != nil {
		return err
	}
	ann := `null`
	if on {
		ann = `"on"`
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}},"spec":{"unschedulable":%t}}`, MaintenanceAnnotation, ann, on)
	if _, err := cs.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("cordon %s: %w", name, err)
	}
	slog.Info("maintenance", "node", name, "on", on)
	return nil
}

// enableCompute enables name's nova-compute again when the cloud runs.
func (s *Service) enableCompute(ctx context.Context, name string) error {
	if s.st.KubernetesOnly(ctx) {
		return nil
	}
	c, err := s.cloud.CloudClient(ctx)
	if err != nil {
		return fmt.Errorf("enable nova-compute on %s: %w", name, err)
	}
	if _, err := c.EnableComputeService(ctx, name); err != nil {
		return fmt.Errorf("enable nova-compute on %s: %w", name, err)
	}
	return nil
}

// Describe completes member listings with what Kubernetes and the cloud know of each
// node: maintenance, the tunnel endpoint its chassis registered, whether it holds the
// images its roles run at the cluster's digests, and the state it holds. What cannot be
// read now is left out.
func (s *Service) Describe(ctx context.Context, ms []api.Member) {
	cs, err := s.adminClient()
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		maint := map[string]bool{}
		for _, n := range nodes.Items {
			maint[n.Name] = n.Annotations[MaintenanceAnnotation] == "on"
		}
		for i := range ms {
			ms[i].Maintenance = maint[ms[i].Name]
		}
	}
	if held, err := s.cloud.StateHeld(ctx); err == nil {
		for i := range ms {
			ms[i].State = held[ms[i].Name]
		}
	}
	s.images.DescribeMembers(ctx, ms)
	if tunnels, err := tunnelsByHost(ctx, cs); err == nil {
		for i := range ms {
			ms[i].Tunnel = tunnels[ms[i].Name]
		}
	} else {
		slog.Debug("tunnel endpoints", "err", err)
	}
}

// sbCentralPort is the southbound database's port for central clients (Neutron, osd),
// with no RBAC role; ovn-controller uses 6642, restricted to its own chassis (charts/ovn).
const sbCentralPort = "16642"

// connectSB connects to the OVN southbound database at its Service's cluster IP over SSL,
// with osd's client certificate (deploy.OVNOsdSecret).
func connectSB(ctx context.Context, cs kubernetes.Interface) (*ovnsb.Client, error) {
	svc, err := cs.CoreV1().Services(deploy.Namespace).Get(ctx, "ovn-sb", metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("the OVN southbound database's service: %w", err)
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == "None" {
		return nil, fmt.Errorf("the OVN southbound database's service has no cluster IP")
	}
	tlsCfg, err := deploy.OVNClientTLS(ctx, cs, deploy.Namespace, "ovn-sb."+deploy.Namespace+".svc.cluster.local")
	if err != nil {
		return nil, err
	}
	return ovnsb.Connect(ctx, "ssl:"+net.JoinHostPort(svc.Spec.ClusterIP, sbCentralPort), tlsCfg)
}

// tunnelsByHost is the tunnel endpoints of every chassis by hostname ("geneve 10.0.0.2").
func tunnelsByHost(ctx context.Context, cs kubernetes.Interface) (map[string]string, error) {
	sb, err := connectSB(ctx, cs)
	if err != nil {
		return nil, err
	}
	defer sb.Close()
	list, err := sb.List(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, c := range list {
		out[c.Hostname] = strings.Join(c.Encaps, ", ")
	}
	return out, nil
}

// deleteChassis deletes the OVN chassis of host and returns their names.
func deleteChassis(ctx context.Context, cs kubernetes.Interface, host string) ([]string, error) {
	sb, err := connectSB(ctx, cs)
	if err != nil {
		return nil, err
	}
	defer sb.Close()
	return sb.DeleteHost(ctx, host)
}
