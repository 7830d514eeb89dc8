package charts

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/deploy"
	"github.com/osdcloud/osd/daemon/storage"
)

// cephLab is the ceph image extracted into a directory, and a network namespace of its own
// in which the chart's daemons run as their pods would: the ceph user, the rendered config
// at its mount paths, the node's address MY_IP on the namespace's loopback.
type cephLab struct {
	t       *testing.T
	root    string // extracted image
	netns   string
	secrets map[string]string // placeholder name -> value (FSID, ADMIN_KEY, ...)
	procs   map[string]*exec.Cmd
	logs    map[string]string
}

// newCephLab extracts the image and generates the Secrets as osd does (deploy.EnsureSecrets;
// the fake clientset stands in for the API server, which is not what is tested here).
func newCephLab(t *testing.T) *cephLab {
	switch {
	case testing.Short():
		t.Skip("builds or finds the ceph image and runs a Ceph cluster for about two minutes; skipped in -short")
	case os.Geteuid() != 0:
		t.Skip("needs root for namespaces, chroot and the image's file owners")
	}
	for _, tool := range []string{"unshare", "tar", "chroot", "ip", "qemu-io"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (test/deps.sh installs it): %v", tool, err)
		}
	}
	img := catalogImage(t, "ceph")
	l := &cephLab{t: t, root: t.TempDir(), procs: map[string]*exec.Cmd{}, logs: map[string]string{}}
	began := time.Now()
	untar := exec.Command("tar", "-x", "--numeric-owner", "-C", l.root)
	rc := mutate.Extract(img)
	defer rc.Close()
	untar.Stdin = rc
	if b, err := untar.CombinedOutput(); err != nil {
		t.Fatalf("extract image ceph: %v\n%s", err, b)
	}
	t.Logf("extracted image ceph in %s", time.Since(began).Round(100*time.Millisecond))

	b := make([]byte, 4)
	rand.Read(b)
	l.netns = "osd-ceph-test-" + hex.EncodeToString(b)
	if out, err := exec.Command("ip", "netns", "add", l.netns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() {
		for name := range l.procs {
			l.stop(name)
		}
		exec.Command("ip", "netns", "del", l.netns).Run()
	})
	l.nsRun("ip", "link", "set", "lo", "up")
	l.nsRun("ip", "addr", "add", "10.99.0.1/32", "dev", "lo") // a second node address

	client := fake.NewSimpleClientset()
	if err := deploy.EnsureSecrets(context.Background(), client, deploy.Namespace, deploy.DefaultSecrets()); err != nil {
		t.Fatal(err)
	}
	secret := func(name, key string) string {
		s, err := client.CoreV1().Secrets(deploy.Namespace).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return string(s.Data[key])
	}
	l.secrets = map[string]string{
		"FSID": secret("ceph-cluster", "fsid"), "ADMIN_KEY": secret("ceph-cluster", "admin-key"), "MON_KEY": secret("ceph-cluster", "mon-key"),
		"MGR_KEY": secret("ceph-cluster", "mgr-key"), "OSD_KEY": secret("ceph-cluster", "osd-key"),
		"CLIENT_GLANCE_KEY": secret("ceph-client-glance", "key"), "CLIENT_CINDER_KEY": secret("ceph-client-cinder", "key"),
		"CLIENT_CINDER_BACKUP_KEY": secret("ceph-client-cinder-backup", "key"),
	}
	for _, d := range []string{"var/lib/ceph/mon/ceph-a", "var/lib/ceph/osd/ceph-0", "var/lib/ceph/block", "run/ceph", "tmp"} {
		p := filepath.Join(l.root, d)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, 64045, 64045); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

func (l *cephLab) nsRun(args ...string) string {
	l.t.Helper()
	out, err := exec.Command("ip", append([]string{"netns", "exec", l.netns}, args...)...).CombinedOutput()
	if err != nil {
		l.t.Fatalf("%v: %v\n%s", args, err, out)
	}
	return string(out)
}

// install renders the chart's config files for myIP, each placeholder filled as the pods'
// config-render steps fill theirs, and writes them where the pods mount them.
func (l *cephLab) install(c cephObjects, myIP string) {
	l.t.Helper()
	pairs := []string{"@@MY_IP@@", myIP}
	for k, v := range l.secrets {
		pairs = append(pairs, "@@"+k+"@@", v)
	}
	fill := strings.NewReplacer(pairs...)
	for file, path := range map[string]string{"ceph.conf": "ceph.conf", "admin.keyring": "ceph.client.admin.keyring",
		"mkfs.keyring": "mkfs.keyring", "mgr.keyring": "mgr.keyring", "clients.keyring": "clients.keyring"} {
		data := fill.Replace(c.config.StringData[file])
		if m := placeholderRE.FindString(data); m != "" {
			l.t.Fatalf("%s keeps %s", file, m)
		}
		dst := filepath.Join(l.root, "etc/ceph", path)
		if err := os.WriteFile(dst, []byte(data), 0o640); err != nil {
			l.t.Fatal(err)
		}
		if err := os.Chown(dst, 0, 64045); err != nil {
			l.t.Fatal(err)
		}
	}
}

const cephEnter = `set -e
r=$1; shift
mount -t proc proc "$r/proc"
mount --rbind /dev "$r/dev"
exec chroot --userspec=64045:64045 "$r" "$@"
`

// cmd is a container's command run as the ceph user in the image, in the lab's network
// namespace and private mount and PID namespaces, with the container's environment.
func (l *cephLab) cmd(c corev1.Container, myIP string) *exec.Cmd {
	args := []string{"netns", "exec", l.netns, "unshare", "-m", "-p", "-f", "--kill-child", "/bin/sh", "-c", cephEnter, "enter", l.root}
	cmd := exec.Command("ip", append(args, c.Command...)...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "HOME=/var/lib/ceph", "MY_IP=" + myIP}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.Name == "OSD_KEY" {
			cmd.Env = append(cmd.Env, "OSD_KEY="+l.secrets["OSD_KEY"])
		}
	}
	return cmd
}

// start runs a daemon's container in the background.
func (l *cephLab) start(name string, c corev1.Container, myIP string) {
	l.t.Helper()
	log := filepath.Join(l.t.TempDir(), name+".log")
	f, err := os.Create(log)
	if err != nil {
		l.t.Fatal(err)
	}
	cmd := l.cmd(c, myIP)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	go func() { cmd.Wait(); f.Close() }()
	l.procs[name], l.logs[name] = cmd, log
}

// stop ends a daemon with SIGTERM, as the kubelet does, then SIGKILL after 20 s. unshare
// blocks SIGTERM while it waits: the signal goes to its child, the daemon (PID 1 of its
// namespace); killing unshare kills the child too (--kill-child).
func (l *cephLab) stop(name string) {
	cmd := l.procs[name]
	if cmd == nil {
		return
	}
	delete(l.procs, name)
	pid := cmd.Process.Pid
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid)); err == nil {
		for _, c := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(c); err == nil {
				syscall.Kill(n, syscall.SIGTERM)
			}
		}
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); strings.Contains(string(b), ") Z ") {
			return // exited, not reaped yet
		}
	}
	cmd.Process.Kill()
}

func (l *cephLab) logTail(name string) string {
	b, _ := os.ReadFile(l.logs[name])
	return tail(string(b), 15)
}

// ceph runs the ceph CLI as client.admin in the image.
func (l *cephLab) ceph(args ...string) (string, error) {
	c := corev1.Container{Command: append([]string{"ceph", "--connect-timeout", "10"}, args...)}
	out, err := l.cmd(c, "").CombinedOutput()
	return string(out), err
}

// waitHealth waits until ceph health is HEALTH_OK.
func (l *cephLab) waitHealth(timeout time.Duration) string {
	l.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out, err := l.ceph("health", "detail")
		if err == nil && strings.HasPrefix(out, "HEALTH_OK") {
			return out
		}
		if time.Now().After(deadline) {
			st, _ := l.ceph("status")
			l.t.Fatalf("ceph health after %s = %s (%v)\n%s\nmon: %s\nosd: %s", timeout, out, err, st, l.logTail("mon"), l.logTail("osd"))
		}
		time.Sleep(2 * time.Second)
	}
}

// TestCephInDebianImage runs the ceph chart's rendered commands in the image osd built:
// monitor mkfs and start, manager, OSD mkfs on a sparse file, the setup Job; then checks
// HEALTH_OK, the pools and the clients' capabilities, that the host's QEMU reaches an RBD
// image in userspace as client.cinder (qemu-io, as nova-compute's guests do), that data
// survives restarts of every daemon, that a larger size grows the OSD, and that the
// monitor follows a changed node address.
func TestCephInDebianImage(t *testing.T) {
	l := newCephLab(t)
	const size = int64(3 << 30)
	c, _ := renderCeph(t, cephSpec(map[string]any{"osd": map[string]any{"blockSizeBytes": size}}))
	l.install(c, "127.0.0.1")
	main := func(d string) corev1.Container { return c.daemons[d].Spec.Template.Spec.Containers[0] }
	began := time.Now()
	l.start("mon", main("mon"), "127.0.0.1")
	l.start("mgr", main("mgr"), "127.0.0.1")
	l.start("osd", main("osd"), "127.0.0.1")
	setup := c.setup.Spec.Template.Spec.Containers[0]
	if out, err := l.cmd(setup, "127.0.0.1").CombinedOutput(); err != nil {
		t.Fatalf("setup Job: %v\n%s\nmon: %s\nosd: %s", err, tail(string(out), 30), l.logTail("mon"), l.logTail("osd"))
	}
	t.Logf("monitor, manager, OSD and setup Job to all placement groups active+clean: %s", time.Since(began).Round(100*time.Millisecond))
	health := l.waitHealth(time.Minute)
	t.Logf("health: %s", strings.TrimSpace(health))
	// The setup Job again changes nothing and succeeds (idempotent).
	if out, err := l.cmd(setup, "127.0.0.1").CombinedOutput(); err != nil {
		t.Fatalf("setup Job re-run: %v\n%s", err, tail(string(out), 20))
	}

	// Pools: one copy each, the PG counts of the values, RBD enabled.
	out, err := l.ceph("osd", "pool", "ls", "detail", "-f", "json")
	if err != nil {
		t.Fatal(err, out)
	}
	var pools []struct {
		Name    string                     `json:"pool_name"`
		Size    int                        `json:"size"`
		PGs     int                        `json:"pg_num"`
		Apps    map[string]json.RawMessage `json:"application_metadata"`
		Autoscl string                     `json:"pg_autoscale_mode"`
	}
	if err := json.Unmarshal([]byte(out), &pools); err != nil {
		t.Fatalf("pool ls: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, p := range pools {
		_, rbd := p.Apps["rbd"]
		got[p.Name] = fmt.Sprintf("size %d pgs %d rbd %v autoscale %s", p.Size, p.PGs, rbd, p.Autoscl)
	}
	want := map[string]string{"volumes": "size 1 pgs 32 rbd true autoscale off", "images": "size 1 pgs 16 rbd true autoscale off",
		"vms": "size 1 pgs 16 rbd true autoscale off", "backups": "size 1 pgs 16 rbd true autoscale off"}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("pool %s = %q, want %q", name, got[name], w)
		}
	}
	// Besides them only the always-on devicehealth manager module's own pool (1 PG).
	if len(got) != len(want)+1 || got["device_health_metrics"] == "" {
		t.Errorf("pools = %v, want %v and device_health_metrics", got, want)
	}
	if out, err := l.ceph("auth", "get", "client.cinder"); err != nil || !strings.Contains(out, `caps osd = "profile rbd pool=volumes, profile rbd pool=vms, profile rbd-read-only pool=images"`) ||
		!strings.Contains(out, l.secrets["CLIENT_CINDER_KEY"]) {
		t.Errorf("client.cinder = %v\n%s\nwant the generated key and the chart's capabilities", err, out)
	}
	if out, err := l.cmd(corev1.Container{Command: c.daemons["osd"].Spec.Template.Spec.Containers[0].ReadinessProbe.Exec.Command}, "").CombinedOutput(); err != nil {
		t.Errorf("ceph-osd readiness probe on a running OSD: %v %s", err, out)
	}
	// What osd status reads (the daemon runs these in the monitor's pod) parses into the
	// cluster's figures.
	raw, err := l.cmd(corev1.Container{Command: storage.Commands()}, "").Output()
	if err != nil {
		t.Fatalf("storage status commands: %v\n%s", err, raw)
	}
	if p := os.Getenv("OSD_CEPH_STATUS_SAMPLE"); p != "" {
		os.WriteFile(p, raw, 0o644)
	}
	var st api.StorageStatus
	if err := storage.ParseCeph(string(raw), &st); err != nil {
		t.Fatal(err)
	}
	if st.Health != "HEALTH_OK" || st.OSDs != 1 || st.OSDsUp != 1 || st.TotalBytes > size || st.TotalBytes < size/100*98 || st.AvailBytes <= 0 || st.AvailBytes > size ||
		len(st.Pools) != 5 || st.Pools[0].Name != "backups" || st.Pools[0].Replicas != 1 || st.Pools[0].PGs != 16 || st.Note == "" {
		t.Errorf("ParseCeph(this cluster) = %+v, want HEALTH_OK, 1/1 OSD, %d bytes, 5 pools of 1 replica", st, size)
	}

	// The host's QEMU writes and reads an RBD image as client.cinder, in userspace.
	keyring := filepath.Join(t.TempDir(), "cinder.keyring")
	os.WriteFile(keyring, []byte("[client.cinder]\nkey = "+l.secrets["CLIENT_CINDER_KEY"]+"\n"), 0o600)
	rbd := corev1.Container{Command: []string{"rbd", "--id", "cinder", "--keyring", "/etc/ceph/cinder.keyring", "create", "volumes/osd-test", "--size", "128M"}}
	os.WriteFile(filepath.Join(l.root, "etc/ceph/cinder.keyring"), []byte("[client.cinder]\nkey = "+l.secrets["CLIENT_CINDER_KEY"]+"\n"), 0o644)
	if out, err := l.cmd(rbd, "").CombinedOutput(); err != nil {
		t.Fatalf("rbd create as client.cinder: %v\n%s", err, out)
	}
	target := func(mon string) string {
		return "rbd:volumes/osd-test:id=cinder:keyring=" + keyring + ":mon_host=" + mon
	}
	qemuIO := func(mon, op string) (string, error) {
		out, err := exec.Command("ip", "netns", "exec", l.netns, "qemu-io", "-f", "raw", "-c", op, target(mon)).CombinedOutput()
		return string(out), err
	}
	start := time.Now()
	if out, err := qemuIO("127.0.0.1", "write -P 0xa5 0 64M"); err != nil || !strings.Contains(out, "wrote 67108864/67108864") {
		t.Fatalf("qemu-io write over RBD: %v\n%s", err, out)
	}
	t.Logf("qemu-io wrote 64 MiB over RBD in %s", time.Since(start).Round(time.Millisecond))

	// Restart every daemon: the data is still there, health comes back.
	for _, d := range []string{"osd", "mgr", "mon"} {
		l.stop(d)
	}
	began = time.Now()
	for _, d := range []string{"mon", "mgr", "osd"} {
		l.start(d, main(d), "127.0.0.1")
	}
	l.waitHealth(2 * time.Minute)
	t.Logf("all daemons restarted to HEALTH_OK in %s", time.Since(began).Round(100*time.Millisecond))
	if out, err := qemuIO("127.0.0.1", "read -P 0xa5 0 64M"); err != nil || !strings.Contains(out, "read 67108864/67108864") {
		t.Fatalf("qemu-io read back after restarts: %v\n%s", err, out)
	}

	// A larger size grows the block file and BlueStore at the OSD's next start.
	c2, _ := renderCeph(t, cephSpec(map[string]any{"osd": map[string]any{"blockSizeBytes": size + 1<<30}}))
	l.install(c2, "127.0.0.1")
	l.stop("osd")
	l.start("osd", c2.daemons["osd"].Spec.Template.Spec.Containers[0], "127.0.0.1")
	l.waitHealth(2 * time.Minute)
	out, _ = l.ceph("osd", "df", "-f", "json")
	var df struct {
		Nodes []struct {
			KB int64 `json:"kb"`
		} `json:"nodes"`
	}
	json.Unmarshal([]byte(out), &df)
	if grown := size + 1<<30; len(df.Nodes) != 1 || df.Nodes[0].KB*1024 <= size || df.Nodes[0].KB*1024 < grown/100*98 {
		t.Errorf("osd df after growing = %+v, want one OSD of %d bytes\n%s", df.Nodes, size+1<<30, l.logTail("osd"))
	}
	if fi, err := os.Stat(filepath.Join(l.root, "var/lib/ceph/block/ceph-0.img")); err != nil || fi.Size() != size+1<<30 {
		t.Errorf("block file = %v, %v, want %d bytes", fi, err, size+1<<30)
	}

	// The node's address changes: the monitor moves its monmap to it, the others follow
	// through the re-rendered ceph.conf.
	for _, d := range []string{"osd", "mgr", "mon"} {
		l.stop(d)
	}
	l.install(c2, "10.99.0.1")
	for _, d := range []string{"mon", "mgr", "osd"} {
		l.start(d, c2.daemons[d].Spec.Template.Spec.Containers[0], "10.99.0.1")
	}
	l.waitHealth(2 * time.Minute)
	if b, _ := os.ReadFile(l.logs["mon"]); !strings.Contains(string(b), "osd: monitor moved to [v2:10.99.0.1:3300,v1:10.99.0.1:6789]") {
		t.Errorf("monitor log lacks the move to 10.99.0.1:\n%s", l.logTail("mon"))
	}
	if out, err := qemuIO("10.99.0.1", "read -P 0xa5 0 64M"); err != nil || !strings.Contains(out, "read 67108864/67108864") {
		t.Errorf("qemu-io read after the address change: %v\n%s", err, out)
	}
}
