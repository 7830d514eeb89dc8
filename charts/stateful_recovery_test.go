package charts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/deploy"
)

// TestStatefulRecoveryInDebianRootfs damages MariaDB's and RabbitMQ's files and runs the
// charts' start scripts with the real daemons (testdata/recover-in-rootfs.sh): RabbitMQ
// moves an unreadable database aside after 3 failed starts and comes back; MariaDB keeps
// its damaged files, and starts in recovery mode from osd-recovery-options so they can be
// dumped (the remedy status gives). It needs root, unshare and OSD_CHARTS_ROOTFS, a rootfs
// with mariadb-server, mariadb-client and rabbitmq-server (TestChartsInDebianRootfs's
// rootfs has them); about 2 minutes.
func TestStatefulRecoveryInDebianRootfs(t *testing.T) {
	rootfs := os.Getenv("OSD_CHARTS_ROOTFS")
	switch {
	case testing.Short():
		t.Skip("starts MariaDB and RabbitMQ several times (about 2 minutes); skipped in -short")
	case os.Geteuid() != 0:
		t.Skip("needs root for namespaces, chroot and overlay mounts")
	case rootfs == "":
		t.Skip("OSD_CHARTS_ROOTFS is not set: a Debian rootfs with mariadb-server, mariadb-client and rabbitmq-server (see TestChartsInDebianRootfs)")
	}
	for _, f := range []string{"usr/sbin/mariadbd", "usr/bin/mariadb-dump", "usr/lib/rabbitmq/bin/rabbitmq-server"} {
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
	for _, name := range []string{"mariadb", "rabbitmq"} {
		svc, _ := deploy.DefaultCatalog().Service(name)
		objs[name], _ = render(t, FS, name, svc, deploy.DeploymentSpec{Images: testImages})
	}
	container := func(svc, kind, name string) map[string]any {
		for _, o := range objs[svc] {
			if o.Kind != kind {
				continue
			}
			for _, c := range containers(o) {
				if c["name"] == name {
					return c
				}
			}
		}
		t.Fatalf("%s renders no %s with container %s", svc, kind, name)
		return nil
	}
	script := func(c map[string]any) string {
		a := c["command"].([]any)
		if len(a) != 3 || a[0] != "/bin/sh" {
			t.Fatalf("container %v command = %v, want /bin/sh -ec SCRIPT", c["name"], a)
		}
		return a[2].(string)
	}
	write("mariadb.sh", script(container("mariadb", "StatefulSet", "mariadb")))
	rabbit := container("rabbitmq", "StatefulSet", "rabbitmq")
	write("rabbitmq.sh", script(rabbit))
	probe := rabbit["readinessProbe"].(map[string]any)["exec"].(map[string]any)["command"].([]any)
	write("rabbitmq.probe.shell", probe[0].(string))
	write("rabbitmq.probe", probe[2].(string))
	for _, o := range objs["rabbitmq"] {
		if o.Kind == "ConfigMap" {
			for file, data := range o.raw["data"].(map[string]any) {
				write(file, data.(string))
			}
		}
	}
	scratch := t.TempDir()
	sh, _ := filepath.Abs("testdata/recover-in-rootfs.sh")
	start := time.Now()
	b, err := exec.Command("unshare", "-n", "-m", "-p", "-f", "--mount-proc", "bash", sh, rootfs, out, scratch).CombinedOutput()
	t.Logf("recover-in-rootfs.sh (%s):\n%s", time.Since(start).Round(time.Second), b)
	if err != nil || !strings.Contains(string(b), "ALL OK") {
		for _, l := range []string{"mariadb.log", "rabbitmq.log"} {
			if d, rerr := os.ReadFile(filepath.Join(scratch, l)); rerr == nil {
				t.Logf("%s:\n%s", l, tail(string(d), 30))
			}
		}
		t.Fatalf("recover-in-rootfs.sh error = %v, want ALL OK", err)
	}
}
