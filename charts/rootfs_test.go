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

	"github.com/osdcloud/osd/bootstrap/deploy"
)

// TestChartsInDebianRootfs runs what the charts render (MariaDB, RabbitMQ and memcached
// start commands, Keystone's init steps, keystone.conf and uwsgi.ini) against the real
// Debian packages in a rootfs, inside private network, mount and PID namespaces, and issues
// Keystone tokens. It needs root, unshare, and a bookworm rootfs in OSD_CHARTS_ROOTFS made by:
//
//	mmdebstrap --variant=minbase --include=keystone,python3-openstackclient,python3-pymysql,\
//	  python3-memcache,uwsgi-core,uwsgi-plugin-python3,mariadb-server,mariadb-client,memcached,\
//	  rabbitmq-server,procps bookworm DIR
//
// (with debconf answering keystone/configure_db false; about 3 minutes). The rootfs is not
// modified: an overlay in t.TempDir() takes every change.
func TestChartsInDebianRootfs(t *testing.T) {
	rootfs := os.Getenv("OSD_CHARTS_ROOTFS")
	switch {
	case testing.Short():
		t.Skip("runs services for about a minute; skipped in -short")
	case rootfs == "":
		t.Skip("OSD_CHARTS_ROOTFS is not set (a Debian rootfs with the service packages; see the test comment)")
	case os.Geteuid() != 0:
		t.Skip("needs root for namespaces, chroot and overlay mounts")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare (util-linux) is not installed")
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
