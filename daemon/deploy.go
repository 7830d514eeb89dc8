package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/osdcloud/osd/bootstrap/deploy"
	"github.com/osdcloud/osd/bootstrap/deploy/helmclient"
	"github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/bootstrap/images/ctrimport"
	"github.com/osdcloud/osd/charts"
	"github.com/osdcloud/osd/daemon/fsutil"
	"github.com/osdcloud/osd/daemon/k3s"
	"github.com/osdcloud/osd/daemon/rest"
)

// deployImages are the images the services osd deploys today run from.
var deployImages = []string{"coredns", "mariadb", "rabbitmq", "memcached", "openstack", "ovn", "compute"}

// builder is the daemon's image builder (one per daemon, shared by init and the API).
func (d *Daemon) builder() *images.Builder {
	d.builderOnce.Do(func() {
		d.imgBuilder = &images.Builder{StateDir: d.cfg.CacheDir, Log: slog.Default().With("component", "images")}
	})
	return d.imgBuilder
}

// ensureImages is the converge step that builds (or finds cached) every image the
// deployment needs and imports into containerd those it does not hold at that digest.
func (d *Daemon) ensureImages(ctx context.Context) (bool, string, error) {
	d.imagesBusy.Lock()
	defer d.imagesBusy.Unlock()
	b := d.builder()
	b.Progress = buildReporter(func(msg string) { d.conv.update(func(s *InitState) { s.Detail = msg }) })
	defer func() { b.Progress = nil }()
	results, err := b.BuildAll(ctx, deployImages...)
	if err != nil {
		return false, "", err
	}
	built := 0
	for _, r := range results {
		if !r.Cached {
			built++
		}
	}
	imported, err := d.importStored(ctx, deployImages...)
	if err != nil {
		return built > 0, "", err
	}
	return built > 0 || len(imported) > 0, fmt.Sprintf("%d built, %d cached, %d imported into containerd", built, len(results)-built, len(imported)), nil
}

// importStored imports the named stored images whose digest containerd does not have.
func (d *Daemon) importStored(ctx context.Context, names ...string) ([]string, error) {
	store, err := d.builder().Store()
	if err != nil {
		return nil, err
	}
	sock := d.k3sConfig().ContainerdSocket()
	refs := map[string]v1.Image{}
	for _, n := range names {
		img, st, err := store.Get(n)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", n, err)
		}
		have, err := k3s.ImageDigest(ctx, sock, st.Ref)
		if err != nil {
			return nil, err
		}
		if have != st.Digest {
			refs[st.Ref] = img
		}
	}
	if len(refs) == 0 {
		return nil, nil
	}
	if err := ctrimport.ImportMany(ctx, sock, refs); err != nil {
		return nil, err
	}
	imported := make([]string, 0, len(refs))
	for r := range refs {
		imported = append(imported, r)
	}
	sort.Strings(imported)
	return imported, nil
}

// kubeClients are the clients the deployment controller uses.
type kubeClients struct {
	kube    kubernetes.Interface
	dynamic dynamic.Interface
	apiext  apiextensions.Interface
	helm    *helmclient.Client
}

func (d *Daemon) clients() (*kubeClients, error) {
	rc, err := k3s.RESTConfig(d.cfg.paths())
	if err != nil {
		return nil, err
	}
	kc := &kubeClients{}
	if kc.kube, err = kubernetes.NewForConfig(rc); err != nil {
		return nil, err
	}
	if kc.dynamic, err = dynamic.NewForConfig(rc); err != nil {
		return nil, err
	}
	if kc.apiext, err = apiextensions.NewForConfig(rc); err != nil {
		return nil, err
	}
	kc.helm = helmclient.New(rc, deploy.ValuesHash, slog.Default().With("component", "helm"))
	return kc, nil
}

// controller is the daemon's one deployment controller, bound to its cluster (made on
// first use, once the embedded Kubernetes runs). Reconcile passes go through reconcile,
// so converge and the background loop never act at the same time.
func (d *Daemon) controller() (*deploy.Controller, *kubeClients, error) {
	d.ctrlMu.Lock()
	defer d.ctrlMu.Unlock()
	if d.ctrl != nil {
		return d.ctrl, d.kc, nil
	}
	kc, err := d.clients()
	if err != nil {
		return nil, nil, err
	}
	d.kc = kc
	d.ctrl = &deploy.Controller{Kube: kc.kube, Dynamic: kc.dynamic, Helm: kc.helm, Charts: charts.FS,
		Log: slog.Default().With("component", "deploy")}
	return d.ctrl, d.kc, nil
}

// reconcile runs one controller pass, serialized with every other.
func (d *Daemon) reconcile(ctx context.Context, c *deploy.Controller) (deploy.Result, error) {
	d.ctrlMu.Lock()
	defer d.ctrlMu.Unlock()
	return c.Reconcile(ctx)
}

// keepReconciling keeps the deployment converged and its status (what osd status shows)
// current after osd init: every minute when ready, sooner while something converges.
func (d *Daemon) keepReconciling(ctx context.Context, c *deploy.Controller) {
	wait := time.Minute
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		res, err := d.reconcile(ctx, c)
		wait = time.Minute
		switch {
		case err != nil && ctx.Err() == nil:
			slog.Warn("reconcile", "err", err)
			wait = 10 * time.Second
		case res.RequeueAfter > 0 && res.RequeueAfter < wait:
			wait = res.RequeueAfter
		}
		if len(res.Actions) > 0 {
			slog.Info("reconcile acted", "actions", len(res.Actions))
		}
	}
}

// deploymentSpec is the OpenStackDeployment osd asks for on this host.
func (d *Daemon) deploymentSpec() (deploy.DeploymentSpec, error) {
	spec := deploy.DeploymentSpec{Profile: "single-node", Images: map[string]string{}}
	for _, n := range deployImages {
		r, ok := images.RecipeByName(n)
		if !ok {
			return spec, fmt.Errorf("no recipe for image %s", n)
		}
		spec.Images[n] = r.Ref
	}
	ip := d.publicIP()
	public := func(port int) string { return "http://" + net.JoinHostPort(ip, fmt.Sprint(port)) }
	authURI := map[string]any{"keystone_authtoken": map[string]any{"www_authenticate_uri": d.keystonePublicURL()}}
	// Data lives under the state dir, so osd reset removes it with everything else.
	volume := func(svc string) map[string]any {
		return map[string]any{"hostPath": filepath.Join(d.cfg.StateDir, "volumes", svc)}
	}
	spec.Services = map[string]deploy.ServiceSpec{
		"mariadb":   {Overrides: map[string]any{"persistence": volume("mariadb")}},
		"rabbitmq":  {Overrides: map[string]any{"persistence": volume("rabbitmq")}},
		"keystone":  {Overrides: map[string]any{"endpoints": map[string]any{"public": d.keystonePublicURL()}}},
		"glance":    {Overrides: map[string]any{"endpoints": map[string]any{"public": public(30292)}, "conf": map[string]any{"glance": authURI}, "persistence": volume("glance")}},
		"placement": {Overrides: map[string]any{"endpoints": map[string]any{"public": public(30778)}, "conf": map[string]any{"placement": authURI}}},
		"ovn":       {Overrides: map[string]any{"persistence": volume("ovn")}},
		"heat": {Overrides: map[string]any{
			"endpoints": map[string]any{"heat": map[string]any{"public": public(30004)}, "cfn": map[string]any{"public": public(30000)}},
			"conf":      map[string]any{"heat": authURI},
		}},
		"nova": {Overrides: map[string]any{
			"endpoints": map[string]any{"public": public(30774) + "/v2.1"},
			"virtType":  d.virtType(),
			"conf": map[string]any{
				"nova":         map[string]any{"vnc": map[string]any{"novncproxy_base_url": public(30680) + "/vnc_lite.html"}},
				"controlPlane": authURI,
			},
		}},
		"neutron": {Overrides: map[string]any{
			"endpoints":     map[string]any{"public": public(30696)},
			"conf":          map[string]any{"neutron": authURI},
			"metadataAgent": map[string]any{"stateHostPath": filepath.Join(d.cfg.StateDir, "volumes", "neutron-metadata")},
		}},
	}
	return spec, nil
}

// virtType is the hypervisor type preflight chose for this host (kvm with hardware
// virtualization, else qemu), as recorded by the last converge.
func (d *Daemon) virtType() string {
	v, ok, err := d.db.GetConfig(context.Background(), configVirtType)
	if err != nil || !ok || v == "" {
		return "qemu"
	}
	return v
}

// publicIP is the address the services' public endpoints use: the node IP, else the
// address of the default route.
func (d *Daemon) publicIP() string {
	if d.cfg.NodeIP != "" {
		return d.cfg.NodeIP
	}
	return defaultRouteIP()
}

// keystonePublicURL is Keystone's address for clients on the host and the network.
func (d *Daemon) keystonePublicURL() string {
	return fmt.Sprintf("http://%s/v3", net.JoinHostPort(d.publicIP(), fmt.Sprint(deploy.KeystoneNodePort)))
}

// defaultRouteIP is the host address used to reach the default gateway (127.0.0.1 if none).
func defaultRouteIP() string {
	c, err := net.Dial("udp4", "192.0.2.1:9") // no packet is sent: UDP connect only picks a route
	if err != nil {
		return "127.0.0.1"
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String()
}

// ensureOpenStack is the converge step that applies the OpenStackDeployment and waits
// until every release is Ready, then writes the admin credentials.
func (d *Daemon) ensureOpenStack(ctx context.Context) (bool, string, error) {
	c, kc, err := d.controller()
	if err != nil {
		return false, "", err
	}
	spec, err := d.deploymentSpec()
	if err != nil {
		return false, "", err
	}
	d.ctrlMu.Lock()
	err = c.EnsureDeployment(ctx, kc.apiext, spec)
	if err == nil {
		_, err = c.RetryFailed(ctx)
	}
	d.ctrlMu.Unlock()
	if err != nil {
		return false, "", err
	}
	changed := false
	var res deploy.Result
	for {
		res, err = d.reconcile(ctx, c)
		if len(res.Actions) > 0 {
			changed = true
		}
		d.conv.update(func(s *InitState) { s.Detail = deploymentProgress(res, err) })
		if err == nil && res.Ready {
			break
		}
		wait := res.RequeueAfter
		if err != nil || wait == 0 {
			wait = 5 * time.Second
		}
		select {
		case <-ctx.Done():
			return changed, deploymentProgress(res, err), fmt.Errorf("deployment not ready: %w", ctx.Err())
		case <-time.After(wait):
		}
	}
	d.reconcilerOnce.Do(func() { go d.keepReconciling(d.runCtx, c) })
	creds, err := deploy.ReadAdminCredentials(ctx, kc.kube, deploy.Namespace, d.keystonePublicURL())
	if err != nil {
		return changed, "", err
	}
	if _, ok := res.Status.Children["horizon"]; ok {
		url := "http://" + net.JoinHostPort(d.publicIP(), "30080") + "/horizon"
		d.conv.update(func(s *InitState) { s.Dashboard = url })
	}
	wrote, err := d.writeCredentials(creds)
	return changed || wrote, fmt.Sprintf("%d releases ready; credentials in %s", len(res.Status.Children), d.cloudsPath()), err
}

// deploymentProgress is one line saying where each release stands.
func deploymentProgress(r deploy.Result, err error) string {
	var parts []string
	names := make([]string, 0, len(r.Status.Children))
	for n := range r.Status.Children {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ch := r.Status.Children[n]
		p := n + " " + ch.State
		if ch.State != deploy.StateReady && ch.Message != "" {
			p += " (" + ch.Message + ")"
		}
		parts = append(parts, p)
	}
	s := strings.Join(parts, ", ")
	if err != nil {
		s += "; last pass: " + err.Error()
	}
	return s
}

func (d *Daemon) cloudsPath() string { return filepath.Join(d.cfg.StateDir, "clouds.yaml") }
func (d *Daemon) openrcPath() string { return filepath.Join(d.cfg.StateDir, "admin-openrc") }

// writeCredentials writes clouds.yaml and admin-openrc (0600) unless they are current.
func (d *Daemon) writeCredentials(c deploy.AdminCredentials) (bool, error) {
	clouds, err := c.CloudsYAML("osd")
	if err != nil {
		return false, err
	}
	changed := false
	for path, data := range map[string][]byte{d.cloudsPath(): clouds, d.openrcPath(): []byte(c.OpenRC())} {
		if cur, err := os.ReadFile(path); err == nil && string(cur) == string(data) {
			continue
		}
		if err := fsutil.WriteFileAtomic(path, data, 0o600); err != nil {
			return changed, err
		}
		changed = true
	}
	return changed, nil
}

// getDeployment answers the OpenStackDeployment's status: each release and each workload
// with the reason it is not ready.
func (d *Daemon) getDeployment(r *http.Request) rest.Response {
	if d.server == nil {
		return rest.ErrorResponse(rest.Errorf(rest.ErrNotReady, "the embedded Kubernetes is not running: run osd init"))
	}
	kc, err := d.clients()
	if err != nil {
		return rest.ErrorResponse(rest.Errorf(rest.ErrNotReady, "%v", err))
	}
	dep, err := deploy.Deployments{Client: kc.dynamic}.Get(r.Context(), deploy.Namespace, deploy.DefaultName)
	if apierrors.IsNotFound(errors.Unwrap(err)) || apierrors.IsNotFound(err) {
		return rest.ErrorResponse(rest.Errorf(rest.ErrNotFound, "no OpenStack deployment yet: osd init creates it"))
	}
	if err != nil {
		return rest.ErrorResponse(err)
	}
	return rest.SyncResponse(dep.Status)
}

// getRenderedValues answers the final Helm values of one service: chart defaults, profile,
// features, common and per-service overrides merged (secrets are never part of values).
// It uses the stored OpenStackDeployment when there is one, else what osd init would ask for.
func (d *Daemon) getRenderedValues(r *http.Request) rest.Response {
	spec, err := d.deploymentSpec()
	if err != nil {
		return rest.ErrorResponse(err)
	}
	if d.server != nil {
		if kc, err := d.clients(); err == nil {
			if dep, err := (deploy.Deployments{Client: kc.dynamic}).Get(r.Context(), deploy.Namespace, deploy.DefaultName); err == nil {
				spec = dep.Spec
			}
		}
	}
	c := &deploy.Controller{Charts: charts.FS}
	vals, err := c.RenderedValues(spec, rest.Var(r, "service"))
	if err != nil {
		var names []string
		for _, svc := range deploy.DefaultCatalog().Services {
			if svc.Enabled {
				names = append(names, svc.Name)
			}
		}
		return rest.ErrorResponse(rest.Errorf(rest.ErrNotFound, "%v: deployed services are %s", err, strings.Join(names, ", ")))
	}
	return rest.SyncResponse(vals)
}
