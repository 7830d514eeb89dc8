package charts

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	corev1 "k8s.io/api/core/v1"
)

// TestCinderInDebianImage runs what the cinder chart renders (Ceph backend) against the
// openstack image osd built, as the cinder user in private mount and PID namespaces: the
// config-render script, the long-running pods' wait-db step (waiting before the Job's db
// sync, passing after), cinder-manage db sync twice (idempotent), and cinder-server as the
// single-replica layout runs it (api, scheduler, volume and backup in one process), whose
// probe path answers without a token while the API asks for one.
// It also checks that the RBD and backup drivers and the rbd CLI the chart relies on load
// in the image. Only what a host lacks is overridden: SQLite instead of MariaDB, a
// loopback port. RabbitMQ, Keystone and Ceph are not contacted (the end-to-end test does).
func TestCinderInDebianImage(t *testing.T) {
	switch {
	case testing.Short():
		t.Skip("builds or finds the openstack image and runs cinder; skipped in -short")
	case os.Geteuid() != 0:
		t.Skip("needs root for chroot and the image's file owners")
	}
	img := catalogImage(t, "openstack")
	root := t.TempDir()
	untar := exec.Command("tar", "-x", "--numeric-owner", "-C", root)
	rc := mutate.Extract(img)
	defer rc.Close()
	untar.Stdin = rc
	if b, err := untar.CombinedOutput(); err != nil {
		t.Fatalf("extract image openstack: %v\n%s", err, b)
	}
	data := "/var/lib/cinder/osd-test"
	if err := os.MkdirAll(filepath.Join(root, data), 0o750); err != nil {
		t.Fatal(err)
	}
	os.Chown(filepath.Join(root, data), 64061, 64061)
	api := freePort(t)
	// The monitor's address is a closed loopback port: the volume service's connection
	// fails there (after rados_connect_timeout) while the API answers.
	c, _ := renderCinder(t, cinderSpec("ceph", map[string]any{"ceph": map[string]any{"monHost": fmt.Sprintf("127.0.0.1:%d", freePort(t))}, "conf": map[string]any{
		"cinder": map[string]any{"database": map[string]any{"connection": "sqlite:///" + data + "/cinder.db"},
			// No RabbitMQ here: oslo.messaging's in-process transport lets the services'
			// RPC servers start (with none they would keep reconnecting, and a stop waits
			// for them).
			"DEFAULT": map[string]any{"state_path": data, "osapi_volume_listen": "127.0.0.1", "osapi_volume_listen_port": api, "transport_url": "fake:/"}},
		"uwsgi": map[string]any{"uwsgi": map[string]any{"http11-socket": fmt.Sprintf("127.0.0.1:%d", api)}},
	}}))
	job := c.job.Spec.Template.Spec
	conf, _ := runConfigRender(t, containerByName(job.InitContainers, "config-render"), c.config.StringData)
	for file, path := range map[string]string{"cinder.conf": "etc/cinder/cinder.conf", "uwsgi.ini": "etc/cinder/uwsgi-osd.ini", "ceph.conf": "etc/ceph/ceph.conf"} {
		b, err := os.ReadFile(filepath.Join(conf, file))
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Dir(filepath.Join(root, path)), 0o755)
		if err := os.WriteFile(filepath.Join(root, path), b, 0o640); err != nil {
			t.Fatal(err)
		}
		os.Chown(filepath.Join(root, path), 0, 64061)
	}
	const enter = `set -e
r=$1; shift
mount -t proc proc "$r/proc"
mount -t tmpfs tmpfs "$r/tmp"
mount --rbind /dev "$r/dev"
exec chroot --userspec=64061:64061 "$r" "$@"
`
	command := func(args []string, timeout time.Duration) *exec.Cmd {
		a := []string{"-m", "-p", "-f", "--kill-child", "/bin/sh", "-c", enter, "enter", root}
		if timeout > 0 {
			a = append(a, "timeout", fmt.Sprint(int(timeout.Seconds())))
		}
		cmd := exec.Command("unshare", append(a, args...)...)
		cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "HOME=/var/lib/cinder"}
		return cmd
	}
	step := func(c *corev1.Container, timeout time.Duration) (string, error) {
		t.Helper()
		began := time.Now()
		b, err := command(c.Command, timeout).CombinedOutput()
		t.Logf("%s: %s (%v)", c.Name, time.Since(began).Round(100*time.Millisecond), err)
		return string(b), err
	}
	server := c.deployments["server"].Spec.Template.Spec
	waitDB := containerByName(server.InitContainers, "wait-db")
	if out, err := step(waitDB, 20*time.Second); err == nil || !strings.Contains(out, "waiting for the cinder-init Job") {
		t.Errorf("wait-db before the db sync = %v\n%s\nwant it waiting", err, tail(out, 5))
	}
	sync := containerByName(job.InitContainers, "db-sync")
	for i := 0; i < 2; i++ {
		if out, err := step(sync, 0); err != nil {
			t.Fatalf("db sync (run %d): %v\n%s", i+1, err, tail(out, 20))
		}
	}
	if out, err := step(waitDB, 60*time.Second); err != nil {
		t.Errorf("wait-db after the db sync: %v\n%s", err, tail(out, 10))
	}
	// The drivers cinder.conf names, and the rbd CLI the RBD driver runs, load in the image.
	check := `import importlib, os, shutil, sys
from oslo_utils import importutils
for cls in ("cinder.volume.drivers.rbd.RBDDriver", "cinder.backup.drivers.ceph.CephBackupDriver"):
    importutils.import_class(cls)
import rados, rbd
missing = [p for p in ("rbd", "qemu-img") if not shutil.which(p)]
sys.exit("not found on PATH %s: %s" % (os.environ.get("PATH"), missing) if missing else 0)
`
	if out, err := command([]string{"python3", "-c", check}, time.Minute).CombinedOutput(); err != nil {
		t.Errorf("RBD and Ceph backup drivers in the image: %v\n%s", err, tail(string(out), 10))
	}

	main := containerByName(server.Containers, "cinder-server")
	logFile := filepath.Join(t.TempDir(), "cinder-server.log")
	// Registered before start's own cleanup, so it runs after cinder-server was stopped.
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logFile)
			t.Logf("cinder-server's log:\n%s", tail(string(b), 40))
		}
	})
	cmd := command(main.Command, 0)
	start(t, cmd.Args, cmd.Env, logFile)
	base := fmt.Sprintf("http://127.0.0.1:%d", api)
	waitProbe(t, base, *main.ReadinessProbe, logFile)
	if r, err := get(base + "/"); err != nil || !strings.Contains(r.body, `"v3.0"`) {
		t.Errorf("GET / = %+v (%v), want the version document with v3.0", r, err)
	}
	checkUnauthorized(t, base+"/v3/osd-test/volumes", "http://127.0.0.1:30500/v3")
	// The scheduler's heartbeat reaches its own row of the services table (Cinder keeps
	// the row's id per process; with several services in one, cinder-server gives each its
	// own). The volume and backup services here wait on the closed monitor port; the
	// scheduler waits up to scheduler_driver_init_wait_time (60 s) for a volume service's
	// first report before its heartbeat starts.
	q := fmt.Sprintf("import sqlite3,sys; r=sqlite3.connect(%q).execute(\"select report_count from services where `binary`='cinder-scheduler' and deleted=0\").fetchall(); sys.exit(0 if len(r) == 1 and r[0][0] > 0 else 'cinder-scheduler rows (report_count): %%s' %% r)", data+"/cinder.db")
	var beat []byte
	var beatErr error
	for deadline := time.Now().Add(110 * time.Second); ; time.Sleep(2 * time.Second) {
		beat, beatErr = command([]string{"python3", "-c", q}, 20*time.Second).CombinedOutput()
		if beatErr == nil || time.Now().After(deadline) {
			break
		}
	}
	if beatErr != nil {
		t.Errorf("the scheduler's heartbeat: %v\n%s", beatErr, tail(string(beat), 5))
	}
	// Every service of the command line was created in the one process (the volume
	// service's connection to the closed monitor port holds the process for up to
	// rados_connect_timeout meanwhile).
	const line = "cinder-server running api, scheduler, volume, backup in one process"
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(time.Second) {
		b, _ := os.ReadFile(logFile)
		if strings.Contains(string(b), line) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("cinder-server's log lacks %q after 90 s", line)
			break
		}
	}
}
