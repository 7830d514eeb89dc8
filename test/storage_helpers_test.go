package test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/storage"
)

// Helpers of the block storage end-to-end checks: Cinder objects through Debian's
// openstack client, Ceph through the monitor's pod, and volumes read and written where a
// guest's disk requests go: the host's QEMU (librbd with the libvirt secret).

// waitField polls `openstack KIND show ID -f value -c FIELD` until it is one of want, or
// fails the test on one of bad (e.g. error) or after timeout. It returns the time taken.
func (n *node) waitField(t testing.TB, timeout time.Duration, kind []string, id, field string, want []string, bad ...string) time.Duration {
	t.Helper()
	t0 := time.Now()
	last := ""
	for time.Since(t0) < timeout {
		out, err := n.openstack(append(append([]string{}, kind...), "show", id, "-f", "value", "-c", field)...)
		last = strings.TrimSpace(out)
		if err == nil {
			for _, w := range want {
				if last == w {
					return time.Since(t0)
				}
			}
			for _, b := range bad {
				if last == b {
					t.Fatalf("%s %s %s = %s, want %v%s", strings.Join(kind, " "), id, field, last, want, n.cinderDiagnosis(kind))
				}
			}
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("%s %s %s = %q after %s, want %v", strings.Join(kind, " "), id, field, last, timeout, want)
	return 0
}

// cinderDiagnosis is what Cinder says of a failed volume operation (its user messages and
// the log of its pods), for a failure message; "" for other kinds.
func (n *node) cinderDiagnosis(kind []string) string {
	if len(kind) == 0 || kind[0] != "volume" {
		return ""
	}
	messages, _ := n.openstack("--os-volume-api-version", "3.3", "volume", "message", "list", "-f", "value", "-c", "Event ID", "-c", "User Message")
	logs, _ := n.kubectl("-n", "openstack", "logs", "-l", "app.kubernetes.io/instance=cinder", "--all-containers", "--tail", "3000", "--prefix")
	// The probes' requests and Python's deprecation warnings hide the rest.
	var kept []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "GET /healthcheck") || strings.Contains(l, "py.warnings") || strings.Contains(l, "warnings.warn") || strings.TrimSpace(strings.TrimSuffix(l[strings.Index(l, "]")+1:], "\x1b[00m")) == "" {
			continue
		}
		kept = append(kept, l)
	}
	if len(kept) > 150 {
		kept = kept[len(kept)-150:]
	}
	return fmt.Sprintf("\ncinder's messages:\n%s\ncinder's pods (last lines but probes and warnings):\n%s", messages, strings.Join(kept, "\n"))
}

// createVolume makes a volume (extra args: --image, --snapshot, ...) and waits until it is
// available; it returns its id and the time from the request to available.
func (n *node) createVolume(t testing.TB, name string, sizeGB int, extra ...string) (string, time.Duration) {
	t.Helper()
	t0 := time.Now()
	args := append([]string{"volume", "create", "--size", fmt.Sprint(sizeGB), "-f", "value", "-c", "id"}, extra...)
	out, err := n.openstack(append(args, name)...)
	if err != nil {
		t.Fatalf("volume create %s: %v\n%s", name, err, out)
	}
	id := strings.TrimSpace(out)
	n.waitField(t, 5*time.Minute, []string{"volume"}, id, "status", []string{"available"}, "error")
	return id, time.Since(t0)
}

// createServer boots a test server (extra args: --image or --volume, ...) and waits until
// it is ACTIVE; it returns its id and the time to ACTIVE.
func (n *node) createServer(t testing.TB, name string, extra ...string) (string, time.Duration) {
	t.Helper()
	t0 := time.Now()
	args := append([]string{"server", "create", "--flavor", "m1.tiny", "--network", "osd-net", "--wait", "-f", "value", "-c", "id"}, extra...)
	out, err := n.openstack(append(args, name)...)
	id := strings.TrimSpace(out)
	if err != nil || !uuidRE.MatchString(id) {
		fault, _ := n.openstack("server", "show", name, "-f", "value", "-c", "status", "-c", "fault")
		t.Fatalf("server create %s: %v\n%s\nserver: %s", name, err, out, fault)
	}
	return id, time.Since(t0)
}

// attach attaches a volume to a server and waits until it is in-use; it returns the
// time taken and the libvirt domain of the server.
func (n *node) attach(t testing.TB, server, volume string) time.Duration {
	t.Helper()
	t0 := time.Now()
	if out, err := n.openstack("server", "add", "volume", server, volume); err != nil {
		t.Fatalf("server add volume %s %s: %v\n%s", server, volume, err, out)
	}
	n.waitField(t, 3*time.Minute, []string{"volume"}, volume, "status", []string{"in-use"}, "error", "error_attaching")
	return time.Since(t0)
}

func (n *node) detach(t testing.TB, server, volume string) {
	t.Helper()
	if out, err := n.openstack("server", "remove", "volume", server, volume); err != nil {
		t.Fatalf("server remove volume %s %s: %v\n%s", server, volume, err, out)
	}
	n.waitField(t, 3*time.Minute, []string{"volume"}, volume, "status", []string{"available"}, "error", "error_detaching")
}

// domain is the libvirt domain (instance-XXXXXXXX) of a server.
func (n *node) domain(t testing.TB, server string) string {
	t.Helper()
	return n.value(t, "server", "show", server, "-f", "value", "-c", "OS-EXT-SRV-ATTR:instance_name")
}

// value is the trimmed output of an openstack command that must succeed.
func (n *node) value(t testing.TB, args ...string) string {
	t.Helper()
	out, err := n.openstack(args...)
	if err != nil {
		t.Fatalf("openstack %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(out)
}

// checkRBDDisk checks in a domain's live XML that the host's QEMU opens the disk of
// volume over RBD with the libvirt secret, as client.cinder.
func checkRBDDisk(t testing.TB, domain, volume string) {
	t.Helper()
	out, err := exec.Command("virsh", "-c", "qemu:///system", "dumpxml", domain).CombinedOutput()
	if err != nil {
		t.Fatalf("virsh dumpxml %s: %v\n%s", domain, err, out)
	}
	disk := regexp.MustCompile(`(?s)<disk type='network'.*?</disk>`)
	for _, d := range disk.FindAllString(string(out), -1) {
		if !strings.Contains(d, "volume-"+volume) {
			continue
		}
		if !strings.Contains(d, "protocol='rbd'") || !strings.Contains(d, "<secret type='ceph' uuid=") || !strings.Contains(d, "username='cinder'") {
			t.Errorf("the disk of volume %s in %s is not RBD through the libvirt secret as client.cinder:\n%s", volume, domain, d)
		}
		return
	}
	t.Fatalf("domain %s has no RBD disk of volume %s:\n%s", domain, volume, out)
}

// cephAdmin runs the ceph or rbd CLI as client.admin in the monitor's pod.
func (n *node) cephAdmin(t testing.TB, args ...string) string {
	t.Helper()
	out, err := n.kubectl(append([]string{"-n", "openstack", "exec", "deploy/ceph-mon", "-c", "ceph-mon", "--"}, args...)...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// rbdSum is the md5 of the first mib MiB of a volume's RBD image, read in Ceph itself.
func (n *node) rbdSum(t testing.TB, volume string, mib int) string {
	t.Helper()
	out := n.cephAdmin(t, "sh", "-c", fmt.Sprintf("rbd export volumes/volume-%s - 2>/dev/null | head -c %d | md5sum", volume, mib<<20))
	return strings.Fields(out)[0]
}

// cephDF is what `ceph df` says of the cluster and its pools, asked in the monitor's pod.
func (n *node) cephDF(t testing.TB) storage.DF {
	t.Helper()
	var df storage.DF
	out := n.cephAdmin(t, "ceph", "df", "-f", "json")
	if err := json.Unmarshal([]byte(out), &df); err != nil {
		t.Fatalf("ceph df: %v\n%s", err, out)
	}
	return df
}

// waitHealthOK waits until Ceph says HEALTH_OK and returns how long that took.
func (n *node) waitHealthOK(t testing.TB, timeout time.Duration) time.Duration {
	t.Helper()
	t0 := time.Now()
	last := ""
	for time.Since(t0) < timeout {
		out, err := n.kubectl("-n", "openstack", "exec", "deploy/ceph-mon", "-c", "ceph-mon", "--", "ceph", "--connect-timeout", "10", "health", "detail")
		last = out
		if err == nil && strings.HasPrefix(out, "HEALTH_OK") {
			return time.Since(t0)
		}
		time.Sleep(3 * time.Second)
	}
	t.Fatalf("ceph health after %s:\n%s", timeout, last)
	return 0
}
