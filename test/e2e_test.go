package test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/deploy"
)

// requireE2E gates the end-to-end suite: it builds (or reuses from the cache dir) every
// service image and deploys OpenStack, which takes minutes.
func requireE2E(t testing.TB) {
	requireRoot(t)
	if os.Getenv("OSD_E2E") == "" {
		t.Skip("set OSD_E2E=1 (make e2e) to run the end-to-end deployment")
	}
	if _, err := exec.LookPath("openstack"); err != nil {
		t.Fatal("the openstack client (Debian's python3-openstackclient) is missing: run test/deps.sh")
	}
}

// query asks the daemon's API and decodes the answer's metadata into out.
func (n *node) query(path string, out any) error {
	resp, err := n.httpClient().Get("http://osd/1.0/" + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var env struct {
		Type     string          `json:"type"`
		Error    string          `json:"error"`
		Metadata json.RawMessage `json:"metadata"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return err
	}
	if env.Type == "error" {
		return fmt.Errorf("GET %s: %s", path, env.Error)
	}
	return json.Unmarshal(env.Metadata, out)
}

// openstack runs Debian's openstackclient with the clouds.yaml osd wrote.
func (n *node) openstack(args ...string) (string, error) {
	cmd := exec.Command("openstack", args...)
	cmd.Env = append(os.Environ(), "OS_CLIENT_CONFIG_FILE="+filepath.Join(n.stateDir, "clouds.yaml"), "OS_CLOUD=osd")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestOpenStackE2E is the end-to-end test: it deploys the shared cloud (osd init killed in
// the middle of the deployment, the daemon restarted, osd init again: sharedCloud), then
// runs every registered group against it as a subtest, checks first, audits next,
// destructive groups last (registerE2E). One subtest runs alone with
// -run 'TestOpenStackE2E/NAME' (the deployment always runs).
func TestOpenStackE2E(t *testing.T) {
	n := sharedCloud(t)
	runGroups(t, n)
}

func init() {
	registerE2E("keystone glance placement", stageCheck, checkKeystoneGlance)
	registerE2E("servers", stageCheck, checkServer)
	registerE2E("osd launch", stageCheck, checkLaunch)
	registerE2E("heat", stageCheck, checkHeat)
	registerE2E("horizon", stageCheck, checkHorizonInstance)
	registerE2E("nothing left behind", stageAudit, auditLeftovers)
	registerE2E("re-run changes nothing", stageAudit, auditRerun)
}

// checkKeystoneGlance: Debian's openstack client gets a token with the written clouds.yaml
// (0600), Glance stores an image and gives it back identical, Placement answers through
// the catalog, and the re-converge after the kill duplicated no user or endpoint.
func checkKeystoneGlance(t *testing.T, n *node) {
	t.Run("token issue with the written clouds.yaml", func(t *testing.T) {
		st, err := os.Stat(filepath.Join(n.stateDir, "clouds.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("clouds.yaml mode = %o, want 600", st.Mode().Perm())
		}
		out, err := n.openstack("token", "issue", "-f", "value", "-c", "id")
		if err != nil || len(strings.TrimSpace(out)) < 20 {
			t.Fatalf("openstack token issue = %q, %v, want a token", out, err)
		}
	})

	t.Run("glance stores an image, placement answers", func(t *testing.T) {
		img := filepath.Join(t.TempDir(), "disk.raw")
		data := make([]byte, 1<<20)
		for i := range data {
			data[i] = byte(i * 7)
		}
		if err := os.WriteFile(img, data, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := n.openstack("image", "create", "--disk-format", "raw", "--container-format", "bare", "--file", img, "-f", "value", "-c", "id", "e2e-image")
		if err != nil {
			t.Fatalf("openstack image create: %v\n%s", err, out)
		}
		id := strings.TrimSpace(out)
		t.Cleanup(func() { n.openstack("image", "delete", id) })
		out, err = n.openstack("image", "show", id, "-f", "value", "-c", "status", "-c", "size")
		if err != nil || !strings.Contains(out, "active") || !strings.Contains(out, "1048576") {
			t.Errorf("openstack image show = %q, %v, want an active image of 1048576 bytes", out, err)
		}
		dl := filepath.Join(t.TempDir(), "back.raw")
		if out, err := n.openstack("image", "save", "--file", dl, id); err != nil {
			t.Errorf("openstack image save: %v\n%s", err, out)
		} else if back, _ := os.ReadFile(dl); string(back) != string(data) {
			t.Errorf("downloaded image differs from the upload (%d bytes back)", len(back))
		}
		out, err = n.openstack("endpoint", "list", "--service", "placement", "-f", "value", "-c", "Interface")
		if err != nil || len(strings.Fields(out)) != 3 {
			t.Errorf("placement endpoints = %q, %v, want public, internal and admin", out, err)
		}
		// Placement's root answers its version document only through the catalog's public URL.
		out, err = n.openstack("versions", "show", "--service", "placement", "-f", "value", "-c", "Status")
		if err != nil || !strings.Contains(out, "CURRENT") {
			t.Errorf("openstack versions show --service placement = %q, %v, want a CURRENT version", out, err)
		}
	})

	t.Run("nothing duplicated", func(t *testing.T) {
		out, err := n.openstack("user", "list", "-f", "value", "-c", "Name")
		if err != nil {
			t.Fatalf("openstack user list: %v\n%s", err, out)
		}
		if c := strings.Count("\n"+out, "\nadmin\n"); c != 1 {
			t.Errorf("admin users = %d, want 1:\n%s", c, out)
		}
		out, err = n.openstack("endpoint", "list", "--service", "identity", "-f", "value", "-c", "Interface")
		if err != nil {
			t.Fatalf("openstack endpoint list: %v\n%s", err, out)
		}
		lines := strings.Fields(out)
		sort.Strings(lines)
		if strings.Join(lines, ",") != "admin,internal,public" {
			t.Errorf("identity endpoints = %v, want one admin, internal and public", lines)
		}
	})
}

// auditRerun: osd init on the converged cloud, after every check group, reports no
// change, and no Helm release has a revision it did not have right after the deployment.
func auditRerun(t *testing.T, n *node) {
	shared.mu.Lock()
	deployed := shared.releases
	shared.mu.Unlock()
	t0 := time.Now()
	out, err := n.osd("init")
	if err != nil {
		t.Fatalf("osd init (re-run): %v\n%s", err, out)
	}
	took := time.Since(t0)
	var after deploy.DeploymentStatus
	if err := n.query("deployment", &after); err != nil {
		t.Fatal(err)
	}
	if got := revisions(after); got != deployed {
		t.Errorf("release revisions after the checks and a re-run = %s, want unchanged since the deployment: %s", got, deployed)
	}
	if strings.Contains(out, ": changed") {
		t.Errorf("re-run changed something:\n%s", out)
	}
	t.Logf("no-op osd init on the converged cloud took %s", took.Round(time.Millisecond))
	if took > 5*time.Second {
		t.Logf("what the slow no-op waited for:\n%s", out)
	}
}

func revisions(dep deploy.DeploymentStatus) string {
	var parts []string
	for name, ch := range dep.Children {
		parts = append(parts, fmt.Sprintf("%s=%d", name, ch.Revision))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func summarize(dep deploy.DeploymentStatus) string {
	var parts []string
	for name, ch := range dep.Children {
		parts = append(parts, name+":"+ch.State)
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}
