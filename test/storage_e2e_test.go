package test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/client"
	"github.com/osdcloud/osd/daemon/storage"
)

// Block storage on the shared cloud: the backend the host probe chose (Ceph on hosts
// without device-mapper and an iSCSI target, such as the test machines). The checks
// group runs with the other checks and deletes what it makes; the restarts group stops the
// daemon and deletes every storage pod, so it runs with the destructive groups.
func init() {
	registerE2E("block storage", stageCheck, checkStorage)
	registerE2E("block storage restarts", stageDestructive, checkStorageRestarts)
}

// requireCeph skips the storage groups on a cloud whose backend is not Ceph (they check
// Ceph's figures and RBD disks) and returns the storage status.
func requireCeph(t *testing.T, n *node) api.StorageStatus {
	t.Helper()
	var st api.StorageStatus
	if err := n.query("storage", &st); err != nil {
		t.Fatal(err)
	}
	if st.Backend != api.StorageCeph {
		t.Skipf("the shared cloud's storage backend is %s (%s): these checks need Ceph", st.Backend, st.Reason)
	}
	t.Cleanup(func() {
		if t.Failed() {
			n.dumpStorage(t)
		}
	})
	return st
}

// clientRestoreBug is what python3-openstackclient 6.0.0 (Debian 12) prints after
// `openstack volume backup restore` was accepted by Cinder: it cannot display the result.
const clientRestoreBug = "cannot unpack non-iterable VolumeBackupsRestore object"

// uuidInText finds UUIDs in a command's output.
var uuidInText = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// checkStorage: Ceph healthy with its one replica explained; the volume type and quotas of
// day one; a volume attached to a running server, written through the server's disk,
// detached, attached to a second server and read back; a snapshot and a volume from it; a
// backup and its restore; a server booted from a new volume made from the image (osd
// launch --volume) that answers ping; a Heat stack with a volume attached to a server; a
// volume larger than the free space failing with Cinder's message; everything deleted and
// the space back in Ceph's figures; --storage-size below the minimum or below the current
// size refused.
func checkStorage(t *testing.T, n *node) {
	requireCeph(t, n)
	t.Run("status", func(t *testing.T) {
		var st api.StorageStatus
		if err := n.query("storage", &st); err != nil {
			t.Fatal(err)
		}
		if st.Backend != "ceph" || st.Health != "HEALTH_OK" || st.OSDsUp != 1 || st.TotalBytes < 4<<30 || !strings.Contains(st.Note, "1 replica") {
			t.Errorf("GET /1.0/storage = %+v, want ceph HEALTH_OK with one OSD up and the one-replica note", st)
		}
		// The OSD's block file is the size osd init chose (Ceph's raw total is that device).
		if d := st.TotalBytes - st.SizeBytes; st.SizeBytes == 0 || d > st.SizeBytes/50 || -d > st.SizeBytes/50 {
			t.Errorf("Ceph's total = %d bytes, want the chosen storage size %d (within 2 %%)", st.TotalBytes, st.SizeBytes)
		}
		out, err := n.osd("status")
		if err != nil || !regexp.MustCompile(`ceph\s+HEALTH_OK, 1/1 OSDs up, [0-9.]+ GiB used, [0-9.]+ GiB free of [0-9.]+ GiB`).MatchString(out) || !strings.Contains(out, "pool volumes") {
			t.Errorf("osd status = %v\n%s\nwant Ceph's health, space and pools", err, out)
		}
	})
	t.Run("volume type and quotas", func(t *testing.T) {
		if out, err := n.openstack("volume", "type", "list", "--default", "-f", "value", "-c", "Name"); err != nil || strings.TrimSpace(out) != "ceph" {
			t.Errorf("default volume type = %q (%v), want ceph", out, err)
		}
		if spec := n.field(t, "volume", "type", "show", "ceph", "-f", "value", "-c", "properties"); !strings.Contains(spec, "volume_backend_name") || !strings.Contains(spec, "ceph") {
			t.Errorf("volume type ceph properties = %s, want volume_backend_name ceph", spec)
		}
		var st api.StorageStatus
		n.query("storage", &st)
		if q, want := n.quotaGigabytes(t), strconv.FormatInt(st.SizeBytes>>30, 10); q != want {
			t.Errorf("gigabytes quota = %s, want the storage size %s GiB", q, want)
		}
	})

	base := n.cephDF(t)
	cleanup := &storageCleanup{n: n}
	defer cleanup.run(t)
	var vol, want string // the volume with data, its md5
	disks := &guestDisk{n: n}
	ok := t.Run("attach, write, detach, attach to another server, read back", func(t *testing.T) {
		a, _ := n.createServer(t, "st-a", "--image", "osd-test")
		cleanup.servers = append(cleanup.servers, a)
		b, _ := n.createServer(t, "st-b", "--image", "osd-test")
		cleanup.servers = append(cleanup.servers, b)
		var took time.Duration
		vol, took = n.createVolume(t, "st-vol", 1)
		cleanup.volumes = append(cleanup.volumes, vol)
		t.Logf("volume create to available: %s", took.Round(time.Millisecond))
		took = n.attach(t, a, vol)
		t.Logf("attach to in-use: %s", took.Round(time.Millisecond))
		want = disks.write(t, a, vol, "osd-e2e-"+vol[:8])
		if got := n.rbdSum(t, vol, 4); got != want {
			t.Fatalf("volume's first 4 MiB in Ceph md5 %s, want %s (what the guest wrote)", got, want)
		}
		n.detach(t, a, vol)
		n.attach(t, b, vol)
		if got := disks.sum(t, b, vol); got != want {
			t.Fatalf("read back in %s: md5 %s, want %s", b, got, want)
		}
	})
	if !ok {
		t.Fatal("no volume with data: the remaining checks need one")
	}

	t.Run("snapshot and volume from snapshot", func(t *testing.T) {
		out, err := n.openstack("volume", "snapshot", "create", "--volume", vol, "--force", "-f", "value", "-c", "id", "st-snap")
		if err != nil {
			t.Fatalf("snapshot create: %v\n%s", err, out)
		}
		snap := strings.TrimSpace(out)
		cleanup.snapshots = append(cleanup.snapshots, snap)
		n.waitField(t, 3*time.Minute, []string{"volume", "snapshot"}, snap, "status", []string{"available"}, "error")
		from, took := n.createVolume(t, "st-from-snap", 1, "--snapshot", snap)
		cleanup.clones = append(cleanup.clones, from)
		if got := n.rbdSum(t, from, 4); got != want {
			t.Errorf("volume from snapshot md5 %s, want %s (the pattern)", got, want)
		}
		t.Logf("volume from snapshot available in %s", took.Round(time.Millisecond))
	})

	t.Run("backup and restore", func(t *testing.T) {
		t0 := time.Now()
		out, err := n.openstack("volume", "backup", "create", "--force", "--name", "st-backup", "-f", "value", "-c", "id", vol)
		if err != nil {
			t.Fatalf("backup create: %v\n%s", err, out)
		}
		backup := strings.TrimSpace(out)
		cleanup.backups = append(cleanup.backups, backup)
		n.waitField(t, 5*time.Minute, []string{"volume", "backup"}, backup, "status", []string{"available"}, "error")
		t.Logf("backup available in %s", time.Since(t0).Round(time.Millisecond))
		target, _ := n.createVolume(t, "st-restored", 1)
		cleanup.volumes = append(cleanup.volumes, target)
		// Debian 12's client (6.0.0) restores into an existing volume only with --force, and
		// fails after Cinder accepted the restore, printing its result; Cinder marks the
		// volume restoring-backup before it answers, so the wait below sees the restore.
		if out, err := n.openstack("volume", "backup", "restore", "--force", backup, target); err != nil && !strings.Contains(out, clientRestoreBug) {
			t.Fatalf("backup restore: %v\n%s", err, out)
		}
		n.waitField(t, 5*time.Minute, []string{"volume"}, target, "status", []string{"available"}, "error", "error_restoring")
		if got := n.rbdSum(t, target, 4); got != want {
			t.Errorf("restored volume md5 %s, want %s (the pattern)", got, want)
		}
	})

	t.Run("boot from volume answers ping", func(t *testing.T) {
		// osd launch --volume: Nova makes the boot volume from the image (an RBD clone of
		// Glance's image), the server reaches ACTIVE and its floating IP answers ping.
		out, err := n.osd("launch", "--volume", "1", "st-launch")
		cleanup.servers = append([]string{"st-launch"}, cleanup.servers...)
		m := regexp.MustCompile(`floating IP\s+([0-9.]+)`).FindStringSubmatch(out)
		if m != nil {
			cleanup.fips = append(cleanup.fips, m[1])
		}
		if err != nil || m == nil || !strings.Contains(out, "booting from a new 1 GiB volume") || !strings.Contains(out, "ping after") {
			t.Fatalf("osd launch --volume 1: %v\n%s\nwant a server booted from a 1 GiB volume answering ping", err, out)
		}
		attached := n.field(t, "server", "show", "st-launch", "-f", "json", "-c", "volumes_attached")
		ids := uuidInText.FindAllString(attached, -1)
		if len(ids) != 1 {
			t.Fatalf("st-launch's volumes_attached = %s, want its boot volume", attached)
		}
		if st := n.field(t, "volume", "show", ids[0], "-f", "value", "-c", "bootable", "-c", "size"); !strings.Contains(st, "true") {
			t.Errorf("the boot volume %s: %s, want bootable", ids[0], st)
		}
		t.Logf("osd launch --volume 1:\n%s", out)
	})

	t.Run("heat stack with a volume attached to a server", func(t *testing.T) {
		tmpl := filepath.Join(t.TempDir(), "stack.yaml")
		os.WriteFile(tmpl, []byte(`heat_template_version: 2018-08-31
description: a server with a volume
resources:
  server:
    type: OS::Nova::Server
    properties: {image: osd-test, flavor: m1.tiny, networks: [{network: osd-net}]}
  volume:
    type: OS::Cinder::Volume
    properties: {size: 1}
  attachment:
    type: OS::Cinder::VolumeAttachment
    properties: {instance_uuid: {get_resource: server}, volume_id: {get_resource: volume}}
outputs:
  volume: {value: {get_resource: volume}}
`), 0o644)
		t0 := time.Now()
		out, err := n.openstack("stack", "create", "--wait", "-t", tmpl, "st-stack")
		cleanup.stacks = append(cleanup.stacks, "st-stack")
		if err != nil {
			reason, _ := n.openstack("stack", "show", "st-stack", "-f", "value", "-c", "stack_status_reason")
			t.Fatalf("stack create: %v\n%s\n%s", err, out, reason)
		}
		v := n.field(t, "stack", "output", "show", "st-stack", "volume", "-f", "value", "-c", "output_value")
		if st := n.field(t, "volume", "show", v, "-f", "value", "-c", "status"); st != "in-use" {
			t.Errorf("the stack's volume is %s, want in-use", st)
		}
		t.Logf("stack with a server and an attached volume CREATE_COMPLETE in %s", time.Since(t0).Round(time.Millisecond))
	})

	t.Run("a volume larger than the free space fails with Cinder's message", func(t *testing.T) {
		df := n.cephDF(t)
		size := int(df.Stats.Avail>>30) + 10
		// Within the project's quota (the storage size) Cinder refuses at once...
		out, err := n.openstack("volume", "create", "--size", strconv.Itoa(size), "st-huge")
		if err == nil || !strings.Contains(out, "exceeds allowed gigabytes quota") {
			t.Errorf("volume create %d GiB = %v\n%s\nwant the quota refusal", size, err, out)
		}
		// ...and with the quota raised, the scheduler finds no backend with the space: the
		// volume goes to error with that message, it does not stay creating.
		before := n.quotaGigabytes(t)
		n.field(t, "quota", "set", "--gigabytes", "100000", "admin")
		defer n.openstack("quota", "set", "--gigabytes", before, "admin")
		out, err = n.openstack("volume", "create", "--size", strconv.Itoa(size), "-f", "value", "-c", "id", "st-huge")
		if err != nil {
			t.Fatalf("volume create %d GiB with the quota raised: %v\n%s", size, err, out)
		}
		huge := strings.TrimSpace(out)
		cleanup.volumes = append(cleanup.volumes, huge)
		took := n.waitField(t, 2*time.Minute, []string{"volume"}, huge, "status", []string{"error"})
		msg, _ := n.openstack("--os-volume-api-version", "3.3", "volume", "message", "list", "-f", "value", "-c", "User Message", "-c", "Resource UUID")
		lower := strings.ToLower(msg) // Zed says "Could not find any available weighted backend."
		if !strings.Contains(msg, huge) || !strings.Contains(lower, "no valid backend") && !strings.Contains(lower, "could not find any available weighted backend") && !strings.Contains(lower, "insufficient") {
			t.Errorf("Cinder's messages = %s\nwant one for %s saying no backend had room", msg, huge)
		}
		t.Logf("%d GiB volume in error after %s: %s", size, took.Round(time.Millisecond), strings.TrimSpace(msg))
	})

	t.Run("everything deleted: the space is back", func(t *testing.T) {
		cleanup.run(t)
		if t.Failed() {
			return
		}
		var after storage.DF
		for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Second) {
			after = n.cephDF(t)
			if after.Stored("volumes") <= base.Stored("volumes") && after.Stored("backups") <= base.Stored("backups") {
				break
			}
		}
		for _, p := range []string{"volumes", "backups", "vms"} {
			if after.Stored(p) > base.Stored(p) {
				t.Errorf("pool %s stores %d bytes after deleting everything, %d before the tests", p, after.Stored(p), base.Stored(p))
			}
		}
		t.Logf("used %d -> %d bytes (raw), pools volumes %d, backups %d", base.Stats.Used, after.Stats.Used, after.Stored("volumes"), after.Stored("backups"))
	})

	t.Run("--storage-size below the minimum is refused before anything is made", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "fresh")
		out, err := n.osdAt(dir, "init", "--storage-size", "1G")
		if err == nil || !strings.Contains(out, "below the minimum of 4.0 GiB") {
			t.Errorf("osd init --storage-size 1G = %v\n%s\nwant refused with the minimum", err, out)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("refused init left %s (%v)", dir, err)
		}
		// The running daemon refuses a shrink the same way (400), changing nothing.
		var st api.StorageStatus
		if err := n.query("storage", &st); err != nil {
			t.Fatal(err)
		}
		smaller := st.SizeBytes - 1<<30
		if smaller < api.MinStorageBytes {
			t.Logf("the storage is %d bytes, the minimum: no smaller size to refuse", st.SizeBytes)
			return
		}
		out, err = n.osd("init", "--storage-size", strconv.FormatInt(smaller, 10))
		if err == nil || !strings.Contains(out, "can grow but not shrink") {
			t.Errorf("osd init --storage-size %d on the running cloud (%d now) = %v\n%s\nwant refused", smaller, st.SizeBytes, err, out)
		}
	})
}

// osdAt runs the CLI with another state dir and run dir under dir (nothing runs there).
func (n *node) osdAt(dir string, args ...string) (string, error) {
	cmd := exec.Command(n.bin, append([]string{"--state-dir", dir, "--run-dir", dir + "-run"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// storageCleanup deletes what the storage checks made: stacks, servers (their volumes go
// with them or become free), backups, the volumes cloned from snapshots (an RBD snapshot
// with clones cannot go), snapshots, volumes, floating IPs.
type storageCleanup struct {
	n                                                          *node
	servers, stacks, backups, clones, snapshots, volumes, fips []string
	done                                                       bool
}

func (c *storageCleanup) run(t *testing.T) {
	if c.done {
		return
	}
	c.done = true
	n := c.n
	for _, s := range c.stacks {
		if out, err := n.openstack("stack", "delete", "--yes", "--wait", s); err != nil {
			t.Errorf("stack delete %s: %v\n%s", s, err, out)
		}
	}
	for _, s := range c.servers {
		if out, err := n.openstack("server", "delete", "--wait", s); err != nil && !strings.Contains(out, "No server") {
			t.Errorf("server delete %s: %v\n%s", s, err, out)
		}
	}
	deleteAll(t, n, []string{"volume", "backup"}, c.backups)
	deleteAll(t, n, []string{"volume"}, c.clones)
	deleteAll(t, n, []string{"volume", "snapshot"}, c.snapshots)
	deleteAll(t, n, []string{"volume"}, c.volumes)
	for _, f := range c.fips {
		n.openstack("floating", "ip", "delete", f)
	}
	if out, _ := n.openstack("volume", "list", "--all-projects", "-f", "value", "-c", "ID", "-c", "Name", "-c", "Status"); strings.TrimSpace(out) != "" {
		t.Errorf("volumes left after the cleanup:\n%s", out)
	}
}

// deleteAll deletes every id of kind at once, then waits until each is gone.
func deleteAll(t *testing.T, n *node, kind []string, ids []string) {
	for _, id := range ids {
		n.openstack(append(append([]string{}, kind...), "delete", id)...)
	}
	for _, id := range ids {
		waitGone(t, n, kind, id)
	}
}

func waitGone(t *testing.T, n *node, kind []string, id string) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		out, err := n.openstack(append(append([]string{}, kind...), "show", id)...)
		if err != nil && (strings.Contains(out, "No ") || strings.Contains(out, "could not be found") || strings.Contains(out, "Not Found")) {
			return
		}
	}
	t.Errorf("%s %s still there after 3 minutes", strings.Join(kind, " "), id)
}

// dumpStorage logs what explains a storage failure: osd status, the pods, and the last
// lines of every Ceph, Cinder, Glance and Nova container (and of the Jobs' steps): Nova's
// compute says why a volume stays attaching or detaching.
func (n *node) dumpStorage(t *testing.T) {
	if out, err := n.osd("status"); err == nil {
		t.Logf("osd status:\n%s", out)
	}
	if out, err := n.kubectl("-n", "openstack", "get", "pods", "-o", "wide"); err == nil {
		t.Logf("pods:\n%s", out)
	}
	out, _ := n.kubectl("-n", "openstack", "get", "pods", "-l", "app.kubernetes.io/instance in (ceph, cinder, glance, nova)", "-o", "name")
	for _, pod := range strings.Fields(out) {
		logs, _ := n.kubectl("-n", "openstack", "logs", pod, "--all-containers", "--prefix", "--tail", "40")
		t.Logf("%s:\n%s", pod, logs)
	}
}

// quotaGigabytes is the admin project's volume gigabytes quota.
func (n *node) quotaGigabytes(t *testing.T) string {
	t.Helper()
	var quota map[string]any
	if err := json.Unmarshal([]byte(n.field(t, "quota", "show", "admin", "-f", "json")), &quota); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(quota["gigabytes"])
}

// checkStorageRestarts: a volume (made from the test image) keeps its data when the daemon
// is stopped, started and re-converged, and when every Ceph and Cinder pod is deleted and
// comes back; Ceph returns to HEALTH_OK and Cinder serves again (a clone of the volume
// holds the same data). The daemon stops leaving the workloads running (as for an
// upgrade): the power cut groups restart everything, here the storage pods are restarted
// on purpose. A cloud that does not come back is marked broken.
func checkStorageRestarts(t *testing.T, n *node) {
	requireCeph(t, n)
	cleanup := &storageCleanup{n: n}
	defer cleanup.run(t)
	vol, _ := n.createVolume(t, "st-restart-vol", 1, "--image", "osd-test")
	cleanup.volumes = append(cleanup.volumes, vol)
	want := n.rbdSum(t, vol, 4)
	volumes := n.field(t, "volume", "list", "-f", "value", "-c", "ID")

	if err := client.RequestKeepWorkloads(n.runDir); err != nil {
		t.Fatal(err)
	}
	code, ok := n.stop(3 * time.Minute)
	if !ok || code != 0 {
		t.Errorf("daemon stop: exit %d, in time %v", code, ok)
	}
	t0 := time.Now()
	if err := n.startDaemon(); err != nil {
		markBroken("the daemon did not start again in the storage restarts")
		t.Fatal(err)
	}
	if out, err := n.osd("init", "--timeout", "30m"); err != nil {
		markBroken("osd init failed after the daemon's restart in the storage restarts")
		t.Fatalf("osd init after the restart: %v\n%s", err, out)
	}
	t.Logf("daemon restarted and converged in %s; ceph HEALTH_OK %s later", time.Since(t0).Round(time.Second), n.waitHealthOK(t, 5*time.Minute).Round(time.Second))

	t1 := time.Now()
	if out, err := n.kubectl("-n", "openstack", "delete", "pod", "-l", "app.kubernetes.io/instance in (ceph, cinder)", "--field-selector", "status.phase=Running", "--wait=true"); err != nil {
		t.Fatalf("delete the storage pods: %v\n%s", err, out)
	}
	deployments, err := n.kubectl("-n", "openstack", "get", "deploy", "-l", "app.kubernetes.io/instance in (ceph, cinder)", "-o", "name")
	if err != nil || len(strings.Fields(deployments)) < 4 {
		t.Fatalf("the storage Deployments = %q (%v), want Ceph's three and Cinder's", deployments, err)
	}
	for _, d := range strings.Fields(deployments) {
		if out, err := n.kubectl("-n", "openstack", "rollout", "status", d, "--timeout", "10m"); err != nil {
			markBroken("the storage pods did not come back")
			t.Fatalf("%s after its pod was deleted: %v\n%s", d, err, out)
		}
	}
	t.Logf("storage pods back in %s; ceph HEALTH_OK %s later", time.Since(t1).Round(time.Second), n.waitHealthOK(t, 5*time.Minute).Round(time.Second))
	if got := n.field(t, "volume", "list", "-f", "value", "-c", "ID"); got != volumes {
		t.Errorf("volumes after the restarts:\n%s\nwant\n%s", got, volumes)
	}
	if got := n.rbdSum(t, vol, 4); got != want {
		t.Errorf("volume data md5 after the restarts %s, want %s (before)", got, want)
	}
	// Cinder serves again: a new volume from the one kept.
	clone, _ := n.createVolume(t, "st-restart-clone", 1, "--source", vol)
	cleanup.clones = append(cleanup.clones, clone)
	if got := n.rbdSum(t, clone, 4); got != want {
		t.Errorf("a volume cloned after the restarts md5 %s, want %s", got, want)
	}
	var st api.StorageStatus
	if err := n.query("storage", &st); err != nil || st.Health != "HEALTH_OK" {
		t.Errorf("GET /1.0/storage after the restarts = %+v, %v", st, err)
	}
}
