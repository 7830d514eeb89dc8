package charts

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/daemon/deploy"
)

// chartsRootfsRecipe is one Debian rootfs with every package TestChartsInDebianRootfs
// runs (the catalog keeps them in separate images), built by osd's image builder into its
// own store under the cache directory (charts-test), apart from the images osd deploys.
var chartsRootfsRecipe = images.Recipe{
	Name: "charts-test-rootfs", Ref: "localhost/osd/charts-test-rootfs:1", Kind: images.KindDebian,
	Suite: images.DefaultSuite, Variant: "minbase",
	Packages: []string{"keystone", "python3-openstackclient", "python3-pymysql", "python3-memcache",
		"uwsgi-core", "uwsgi-plugin-python3", "mariadb-server", "mariadb-client", "memcached", "rabbitmq-server", "procps"},
	Debconf: []string{"keystone keystone/configure_db boolean false", "keystone keystone/configure_rabbit boolean false",
		"keystone keystone/configure_ksat boolean false", "keystone keystone/configure_api-endpoint boolean false",
		"keystone keystone/create-admin-tenant boolean false"},
	Cmd: []string{"/bin/bash"},
}

// TestChartsInDebianRootfs runs what the charts render (MariaDB, RabbitMQ and memcached
// start commands, Keystone's init steps, keystone.conf and uwsgi.ini) against the real
// Debian packages in a rootfs, inside private network, mount and PID namespaces, and issues
// Keystone tokens. It needs root and unshare. The rootfs is chartsRootfsRecipe's image,
// built (about 3 minutes the first time, cached after) and unpacked into t.TempDir(), or a
// directory in OSD_CHARTS_ROOTFS made by:
//
//	mmdebstrap --variant=minbase --include=keystone,python3-openstackclient,python3-pymysql,\
//	  python3-memcache,uwsgi-core,uwsgi-plugin-python3,mariadb-server,mariadb-client,memcached,\
//	  rabbitmq-server,procps bookworm DIR
//
// (with debconf answering keystone/configure_db false). The rootfs is not modified: an
// overlay in t.TempDir() takes every change.
func TestChartsInDebianRootfs(t *testing.T) {
	switch {
	case testing.Short():
		t.Skip("runs services for about a minute; skipped in -short")
	case os.Geteuid() != 0:
		t.Skip("needs root for namespaces, chroot and overlay mounts")
	}
	for _, tool := range []string{"unshare", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (test/deps.sh installs util-linux and tar): %v", tool, err)
		}
	}
	rootfs := os.Getenv("OSD_CHARTS_ROOTFS")
	if rootfs == "" {
		recipe, store := chartsRootfsRecipe, filepath.Join(cacheDir(), "charts-test")
		if rel := testRelease(t); rel.Name != images.DefaultReleaseName {
			// Another release's packages: their own image, in their own store.
			recipe.Suite, recipe.Ref = rel.Suite, "localhost/osd/charts-test-rootfs:"+rel.Name
			store += "-" + rel.Name
			t.Logf("release %s", rel.Title())
		}
		img := builtImage(t, store, recipe)
		rootfs = t.TempDir()
		began := time.Now()
		unpackImage(t, img, rootfs)
		t.Logf("unpacked %s in %s", chartsRootfsRecipe.Name, time.Since(began).Round(time.Second))
	}
	for _, f := range []string{"usr/bin/keystone-wsgi-public", "usr/sbin/mariadbd", "usr/bin/memcached", "usr/lib/rabbitmq/bin/rabbitmq-server", "usr/bin/uwsgi"} {
		if _, err := os.Lstat(filepath.Join(rootfs, f)); err != nil {
			t.Fatalf("OSD_CHARTS_ROOTFS lacks %s: %v", f, err)
		}
	}

	out := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(out, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	objs := map[string][]object{}
	for _, name := range []string{"keystone", "mariadb", "memcached", "rabbitmq"} {
		svc, _ := deploy.DefaultCatalog().Service(name)
		objs[name], _ = render(t, FS, name, svc, deploy.DeploymentSpec{Images: testImages})
	}
	find := func(svc, kind string) object {
		for _, o := range objs[svc] {
			if o.Kind == kind {
				return o
			}
		}
		t.Fatalf("%s renders no %s", svc, kind)
		return object{}
	}
	byName := func(o object) map[string]map[string]any {
		m := map[string]map[string]any{}
		for _, c := range containers(o) {
			m[c["name"].(string)] = c
		}
		return m
	}
	cmd := func(c map[string]any) []string {
		var s []string
		for _, a := range c["command"].([]any) {
			s = append(s, a.(string))
		}
		return s
	}
	script := func(c map[string]any) string {
		a := cmd(c)
		if len(a) != 3 || a[0] != "/bin/sh" {
			t.Fatalf("container %v command = %v, want /bin/sh -ec SCRIPT", c["name"], a)
		}
		return a[2]
	}
	for file, data := range find("keystone", "Secret").raw["stringData"].(map[string]any) {
		write(file, data.(string))
	}
	job := byName(find("keystone", "Job"))
	write("step-config-render.sh", script(job["config-render"]))
	write("step-db-create.sh", script(job["db-create"]))
	write("step-db-sync.args", strings.Join(cmd(job["db-sync"]), " "))
	write("step-bootstrap.args", strings.Join(cmd(job["bootstrap"]), " "))
	write("keystone.args", strings.Join(cmd(byName(find("keystone", "Deployment"))["keystone"]), " "))
	write("mariadb.sh", script(byName(find("mariadb", "StatefulSet"))["mariadb"]))
	write("memcached.args", strings.Join(cmd(byName(find("memcached", "Deployment"))["memcached"])[1:], " "))
	rabbit := byName(find("rabbitmq", "StatefulSet"))["rabbitmq"]
	write("rabbitmq.sh", script(rabbit))
	probe := rabbit["readinessProbe"].(map[string]any)["exec"].(map[string]any)["command"].([]any)
	if len(probe) != 3 || probe[1] != "-c" {
		t.Fatalf("rabbitmq readiness probe = %v, want SHELL -c SCRIPT", probe)
	}
	write("rabbitmq.probe.shell", probe[0].(string)) // the probe's own shell (it uses bash's /dev/tcp)
	write("rabbitmq.probe", probe[2].(string))
	for file, data := range find("rabbitmq", "ConfigMap").raw["data"].(map[string]any) {
		write(file, data.(string))
	}

	// The clouds.yaml the daemon hands over (deploy.AdminCredentials), pointed at the API.
	pw := make([]byte, 32)
	if _, err := rand.Read(pw); err != nil {
		t.Fatal(err)
	}
	adminPW := hex.EncodeToString(pw)
	clouds, err := deploy.AdminCredentials{AuthURL: "http://127.0.0.1:5000/v3", Password: adminPW, Region: "RegionOne"}.CloudsYAML("osd")
	if err != nil {
		t.Fatal(err)
	}
	write("clouds.yaml", string(clouds))

	scratch := t.TempDir()
	script0, _ := filepath.Abs("testdata/check-in-rootfs.sh")
	start := time.Now()
	c := exec.Command("unshare", "-n", "-m", "-p", "-f", "--mount-proc", "bash", script0, rootfs, out, scratch)
	c.Env = append(os.Environ(), "ADMINPW="+adminPW)
	b, err := c.CombinedOutput()
	t.Logf("check-in-rootfs.sh (%s):\n%s", time.Since(start).Round(time.Second), b)
	if err != nil || !strings.Contains(string(b), "ALL OK") {
		for _, l := range []string{"mariadb.log", "rabbitmq.log", "uwsgi.log"} {
			if d, rerr := os.ReadFile(filepath.Join(scratch, l)); rerr == nil {
				t.Logf("%s:\n%s", l, tail(string(d), 20))
			}
		}
		t.Fatalf("check-in-rootfs.sh error = %v, want ALL OK", err)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
