package test

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func init() { registerE2E("no secret on a command line", stageAudit, checkNoSecretInArgv) }

// argvSampler records every distinct process command line on the host from the start of
// the shared cloud's deployment on (sampled every 200 ms): osd init, the daemon's kill and
// re-converge, every pod's init steps and every group's work.
var argvSampler struct {
	once    sync.Once
	mu      sync.Mutex
	seen    map[string]bool
	samples int
	full    bool
}

// maxArgvLines bounds what the sampler keeps (distinct command lines).
const maxArgvLines = 200000

func startArgvSampler() {
	argvSampler.once.Do(func() {
		argvSampler.seen = map[string]bool{}
		go func() {
			for {
				sampleArgv()
				time.Sleep(200 * time.Millisecond)
			}
		}()
	})
}

func sampleArgv() {
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var lines []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil || len(b) == 0 {
			continue
		}
		lines = append(lines, strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " "))
	}
	argvSampler.mu.Lock()
	defer argvSampler.mu.Unlock()
	argvSampler.samples++
	for _, l := range lines {
		if len(argvSampler.seen) >= maxArgvLines {
			argvSampler.full = true
			return
		}
		argvSampler.seen[l] = true
	}
}

// secretValues are the cloud's secret values by "Secret/key": every one-line value of at
// least 12 bytes of the openstack namespace's Secrets but Helm's release records, less
// identifiers that are not credentials (UUIDs: Ceph's fsid, the libvirt secret's uuid),
// and the admin password.
func secretValues(t *testing.T, n *node) map[string]string {
	out, err := n.kubectl("get", "secrets", "-n", "openstack", "-o", "json")
	if err != nil {
		t.Fatalf("kubectl get secrets: %v", err)
	}
	var list struct {
		Items []struct {
			Metadata struct{ Name string } `json:"metadata"`
			Type     string                `json:"type"`
			Data     map[string]string     `json:"data"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("decode the Secrets: %v", err)
	}
	vals := map[string]string{}
	for _, s := range list.Items {
		if s.Type == "helm.sh/release.v1" {
			continue
		}
		for k, v := range s.Data {
			b, err := base64.StdEncoding.DecodeString(v)
			val := strings.TrimSpace(string(b))
			if err != nil || len(val) < 12 || strings.Contains(val, "\n") || uuidRE.MatchString(strings.ToLower(val)) {
				continue
			}
			vals[s.Metadata.Name+"/"+k] = val
		}
	}
	_, password := n.adminCredentials(t)
	vals["admin-openrc/OS_PASSWORD"] = password
	return vals
}

// checkNoSecretInArgv (issue 35, item 5): no secret of the cloud appeared on any process's
// command line from the deployment on, through every group before this one and through a
// restart of the Keystone and RabbitMQ pods (their init steps render configs and set
// RabbitMQ's users' passwords) made here.
func checkNoSecretInArgv(t *testing.T, n *node) {
	startArgvSampler() // no-op: it runs since the deployment
	for _, restart := range []struct{ selector, kind, name string }{
		{"app.kubernetes.io/instance=keystone,app.kubernetes.io/component=api", "deployment", "keystone-api"},
		{"app.kubernetes.io/instance=rabbitmq", "statefulset", "rabbitmq"},
	} {
		if out, err := n.kubectl("delete", "pod", "-n", "openstack", "-l", restart.selector, "--wait=false"); err != nil {
			t.Fatalf("restart %s: %v\n%s", restart.name, err, out)
		}
		if out, err := n.kubectl("rollout", "status", "-n", "openstack", restart.kind+"/"+restart.name, "--timeout=5m"); err != nil {
			t.Fatalf("%s after its restart: %v\n%s", restart.name, err, out)
		}
	}
	if out, err := n.kubectl("wait", "-n", "openstack", "--for=condition=Ready", "pod", "-l", "app.kubernetes.io/instance=rabbitmq", "--timeout=5m"); err != nil {
		t.Fatalf("rabbitmq not Ready after its restart: %v\n%s", err, out)
	}
	time.Sleep(time.Second) // a last sample
	vals := secretValues(t, n)
	if len(vals) < 10 {
		t.Fatalf("found %d secret values in the openstack namespace, want the cloud's (at least 10): the check would prove nothing", len(vals))
	}
	argvSampler.mu.Lock()
	lines := make([]string, 0, len(argvSampler.seen))
	for l := range argvSampler.seen {
		lines = append(lines, l)
	}
	samples, full := argvSampler.samples, argvSampler.full
	argvSampler.mu.Unlock()
	if samples < 100 {
		t.Fatalf("the command line sampler ran %d times, want it running since the deployment", samples)
	}
	found := 0
	for _, l := range lines {
		for name, v := range vals {
			if strings.Contains(l, v) {
				found++
				prog, _, _ := strings.Cut(l, " ")
				// The secret itself is never printed: its name and the program are.
				t.Errorf("the value of %s was on the command line of %s", name, prog)
			}
		}
	}
	t.Logf("%d distinct command lines in %d samples (kept all: %v) checked against %d secret values: %d found", len(lines), samples, !full, len(vals), found)
}
