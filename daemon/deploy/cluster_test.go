package deploy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/osdcloud/osd/charts"
	"github.com/osdcloud/osd/daemon/deploy/helmclient"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestControllerOnCluster deploys MariaDB, RabbitMQ, memcached and Keystone with the real
// charts into a throwaway namespace osd-dev-XXXX of a running osd cluster, waits for Ready,
// checks that a second pass changes nothing, and removes everything. It needs the cluster's
// kubeconfig (OSD_KUBECONFIG, default /var/lib/osd/kubeconfig), cluster DNS (the coredns
// release), and the images: OSD_TEST_IMAGES="openstack=REF,mariadb=REF,..." or, by
// default, spec.images of the cluster's own openstack/default OpenStackDeployment.
// Host paths and node ports are switched off so it cannot collide with the real deployment.
// It stays opt-in because it needs a running osd cluster; what it covers (the controller
// installing these charts until Ready, and a second pass changing nothing) is covered on a
// fresh cluster by TestOpenStackE2E in test/, which make test runs.
func TestControllerOnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("deploys to a cluster for minutes; skipped in -short")
	}
	path := os.Getenv("OSD_KUBECONFIG")
	if path == "" {
		path = "/var/lib/osd/kubeconfig"
	}
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no osd cluster: %s absent (set OSD_KUBECONFIG)", path)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 30 * time.Second
	kube := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if _, err := kube.Discovery().ServerVersion(); err != nil {
		t.Skipf("osd cluster at %s does not answer: %v", cfg.Host, err)
	}

	images := map[string]string{}
	if env := os.Getenv("OSD_TEST_IMAGES"); env != "" {
		for _, kv := range strings.Split(env, ",") {
			k, v, _ := strings.Cut(kv, "=")
			images[k] = v
		}
	} else if dep, err := (Deployments{Client: dyn}).Get(ctx, Namespace, DefaultName); err == nil {
		images = dep.Spec.Images
	}
	for _, need := range []string{"openstack", "mariadb", "rabbitmq", "memcached"} {
		if images[need] == "" {
			t.Skipf("no image reference for %s (set OSD_TEST_IMAGES or deploy osd first)", need)
		}
	}

	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	ns := "osd-dev-" + hex.EncodeToString(b)
	// Only what this test deploys: every other service of the catalog would take the real
	// deployment's node ports (a second glance-api Service on 30292 left the real Glance
	// unable to install).
	deployed := map[string]bool{"coredns": true, "mariadb": true, "rabbitmq": true, "memcached": true, "keystone": true}
	cat := Catalog{}
	for _, s := range DefaultCatalog().Services {
		if !deployed[s.Name] {
			continue
		}
		if s.Namespace == Namespace {
			s.Namespace = ns
		}
		cat.Services = append(cat.Services, s)
	}
	off := false
	svcDomain := ns + ".svc"
	spec := DeploymentSpec{Images: images, Services: map[string]ServiceSpec{
		"coredns":   {Enabled: &off},
		"mariadb":   {Overrides: map[string]any{"persistence": map[string]any{"hostPath": ""}}},
		"rabbitmq":  {Overrides: map[string]any{"persistence": map[string]any{"hostPath": ""}}},
		"memcached": {},
		"keystone": {Overrides: map[string]any{
			"service":   map[string]any{"type": "ClusterIP"},
			"endpoints": map[string]any{"public": "http://keystone-api." + svcDomain + ":5000/v3", "internal": "http://keystone-api." + svcDomain + ":5000/v3", "admin": "http://keystone-api." + svcDomain + ":5000/v3"},
			"conf": map[string]any{"keystone": map[string]any{
				"database": map[string]any{"connection": "mysql+pymysql://keystone:@@DB_PASSWORD@@@mariadb." + svcDomain + ":3306/keystone?charset=utf8"},
				"cache":    map[string]any{"memcache_servers": []any{"memcached." + svcDomain + ":11211"}},
			}},
		}},
	}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := &Controller{Kube: kube, Dynamic: dyn, Helm: helmclient.New(cfg, ValuesHash, log), Charts: charts.FS,
		Catalog: cat, Namespace: ns, Log: log}
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer ccancel()
		for _, s := range []string{"keystone", "memcached", "rabbitmq", "mariadb"} {
			if err := helmclient.New(cfg, ValuesHash, log).Uninstall(ns, s); err != nil {
				t.Logf("cleanup: %v", err)
			}
		}
		if err := kube.CoreV1().Namespaces().Delete(cctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Logf("cleanup: delete namespace %s: %v", ns, err)
		}
	})
	apiext := apiextensions.NewForConfigOrDie(cfg)
	if err := c.EnsureDeployment(ctx, apiext, spec); err != nil {
		t.Fatalf("EnsureDeployment() error = %v", err)
	}
	start := time.Now()
	res, err := c.UntilReady(ctx, func(r Result, err error) {
		var parts []string
		for name, ch := range r.Status.Children {
			parts = append(parts, fmt.Sprintf("%s=%s %s", name, ch.State, ch.Message))
		}
		t.Logf("%5.0fs %v err=%v", time.Since(start).Seconds(), parts, err)
	})
	if err != nil {
		t.Fatalf("UntilReady() error = %v; status %+v", err, res.Status)
	}
	t.Logf("ready after %s", time.Since(start).Round(time.Second))
	// Converged: another pass performs no Helm action, revisions stay 1.
	noop := time.Now()
	res, err = c.Reconcile(ctx)
	if err != nil || !res.Ready || len(res.Actions) != 0 {
		t.Fatalf("Reconcile() converged = ready %v actions %v err %v, want ready, none", res.Ready, res.Actions, err)
	}
	t.Logf("no-op reconcile took %s", time.Since(noop).Round(time.Millisecond))
	for name, ch := range res.Status.Children {
		if ch.Revision != 1 {
			t.Errorf("release %s revision = %d, want 1", name, ch.Revision)
		}
	}
}
