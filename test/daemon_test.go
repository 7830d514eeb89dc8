package test

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/bootstrap/images/oci"
	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/cluster"
	"github.com/osdcloud/osd/daemon/k3s"
)

// TestDaemonLifecycle starts a real daemon with its embedded k3s, waits for the node,
// runs a pod from an image osd built itself, reads its logs, stops the daemon, resets the
// host and checks that nothing osd made is left.
func TestDaemonLifecycle(t *testing.T) {
	requireRoot(t)
	hostToItself(t)
	fwdBefore, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	n := newNode(t)
	n.start("--https-address", "127.0.0.1:18443")
	t0 := time.Now()
	out, err := n.osd("init", "--kubernetes-only", "--timeout", "5m")
	if err != nil {
		t.Fatalf("osd init: %v\n%s", err, out)
	}
	t.Logf("osd init on a running daemon took %s:\n%s", time.Since(t0).Round(100*time.Millisecond), out)
	n.waitNodeReady(time.Minute)

	t.Run("init again changes nothing", func(t *testing.T) {
		t0 := time.Now()
		out, err := n.osd("init", "--kubernetes-only")
		if err != nil {
			t.Fatalf("second osd init: %v\n%s", err, out)
		}
		if strings.Contains(out, ": changed") {
			t.Errorf("second osd init changed the host:\n%s", out)
		}
		t.Logf("no-op osd init took %s", time.Since(t0).Round(time.Millisecond))
	})

	t.Run("bad init input refused, state kept", func(t *testing.T) {
		for _, args := range [][]string{
			{"init", "--external-interface", "nosuchnic0"},
			{"init", "--external-cidr", "300.1.2.0/24"},
			{"init", "--timeout", "-5s"},
		} {
			out, err := n.osd(args...)
			if err == nil {
				t.Errorf("osd %v succeeded, want a refusal:\n%s", args, out)
			}
			if !strings.Contains(out, "nosuchnic0") && !strings.Contains(out, "300.1.2.0") && !strings.Contains(out, "--timeout") {
				t.Errorf("osd %v = %q, want it to name the bad value", args, out)
			}
		}
		info, err := n.info()
		if err != nil || !info.Kubernetes.NodeReady {
			t.Errorf("after refused inits: %+v, %v, want the node still Ready", info.Kubernetes, err)
		}
	})

	t.Run("second daemon refused", func(t *testing.T) {
		out, err := exec.Command(n.bin, append(n.globalArgs(), "daemon")...).CombinedOutput()
		if err == nil {
			t.Fatalf("second osd daemon on the same state dir started; output:\n%s", out)
		}
		log, _ := os.ReadFile(filepath.Join(n.stateDir, "logs", "k3s.log"))
		if !strings.Contains(string(out)+string(log), "already running") {
			t.Errorf("second daemon output = %q, want it to say another daemon is already running", out)
		}
	})

	t.Run("status formats", func(t *testing.T) {
		out, err := n.osd("status", "--format", "json")
		if err != nil {
			t.Fatalf("osd status --format json: %v\n%s", err, out)
		}
		var info api.ServerInfo
		if err := json.Unmarshal([]byte(out), &info); err != nil {
			t.Fatalf("osd status --format json is not JSON: %v\n%s", err, out)
		}
		if info.State != api.StateRunning || !info.Kubernetes.NodeReady || info.Version == "" {
			t.Errorf("osd status = %+v, want running with node Ready", info)
		}
		out, err = n.osd("status")
		if err != nil || !strings.Contains(out, "Ready") {
			t.Errorf("osd status = %q, %v, want a table saying Ready", out, err)
		}
		if out, err := n.osd("status", "--format", "xml"); err == nil || !strings.Contains(out, "unknown format") {
			t.Errorf("osd status --format xml = %q, %v, want an unknown format error", out, err)
		}
	})

	t.Run("kubeconfig is private", func(t *testing.T) {
		st, err := os.Stat(filepath.Join(n.stateDir, "kubeconfig"))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("kubeconfig mode = %o, want 600", st.Mode().Perm())
		}
		st, err = os.Stat(n.socket())
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm()&0o077 != 0 {
			t.Errorf("socket mode = %o, want root-only", st.Mode().Perm())
		}
	})

	t.Run("api errors are enveloped", func(t *testing.T) {
		c := n.httpClient()
		for _, tc := range []struct {
			method, path string
			want         int
		}{
			{"GET", "/1.0/nonexistent", 404},
			{"DELETE", "/1.0", 405},
			{"GET", "/2.0", 404},
		} {
			req, _ := http.NewRequest(tc.method, "http://osd"+tc.path, nil)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", tc.method, tc.path, err)
			}
			var env api.Response
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err := json.Unmarshal(body, &env); err != nil {
				t.Errorf("%s %s body %q is not an envelope: %v", tc.method, tc.path, body, err)
				continue
			}
			if resp.StatusCode != tc.want || env.Type != api.ErrorResponse || env.StatusCode != tc.want || env.Error == "" {
				t.Errorf("%s %s = %d %+v, want %d error envelope", tc.method, tc.path, resp.StatusCode, env, tc.want)
			}
		}
	})

	t.Run("pod from an osd-built image", func(t *testing.T) {
		img, ref, err := images.BusyboxImage()
		if err != nil {
			t.Fatal(err)
		}
		archive := filepath.Join(t.TempDir(), "busybox.tar")
		if err := oci.WriteArchiveFile(archive, map[string]v1.Image{ref: img}); err != nil {
			t.Fatal(err)
		}
		if out, err := n.osd("ctr", "-n", "k8s.io", "images", "import", archive); err != nil {
			t.Fatalf("ctr images import: %v\n%s", err, out)
		}
		if out, err := n.kubectl("run", "hello", "--image", ref, "--image-pull-policy", "Never", "--restart", "Never",
			"--command", "--", "/bin/sh", "-c", "echo hello from osd; sleep 1"); err != nil {
			t.Fatalf("kubectl run: %v\n%s", err, out)
		}
		deadline := time.Now().Add(2 * time.Minute)
		phase := ""
		for time.Now().Before(deadline) {
			out, _ := n.kubectl("get", "pod", "hello", "-o", "jsonpath={.status.phase}")
			phase = strings.TrimSpace(out)
			if phase == "Succeeded" || phase == "Failed" {
				break
			}
			time.Sleep(time.Second)
		}
		if phase != "Succeeded" {
			desc, _ := n.kubectl("describe", "pod", "hello")
			t.Fatalf("pod phase = %q, want Succeeded\n%s", phase, desc)
		}
		out, err := n.kubectl("logs", "hello")
		if err != nil || !strings.Contains(out, "hello from osd") {
			t.Fatalf("kubectl logs hello = %q, %v, want the pod's line", out, err)
		}
		// A pod that is still running when the daemon stops: its shim and process must go.
		if out, err := n.kubectl("run", "sleeper", "--image", ref, "--image-pull-policy", "Never", "--restart", "Never",
			"--command", "--", "/bin/sleep", "3600"); err != nil {
			t.Fatalf("kubectl run sleeper: %v\n%s", err, out)
		}
		if out, err := n.kubectl("wait", "--for=condition=Ready", "pod/sleeper", "--timeout=120s"); err != nil {
			t.Fatalf("sleeper not running: %v\n%s", err, out)
		}
		kc := k3s.Paths{StateDir: n.stateDir, RunDir: n.runDir}
		if shims := processesMatching(kc.ContainerdSocket()); len(shims) == 0 {
			t.Errorf("processes of osd's containerd with a running pod = %v, want the running pod's shim", shims)
		}
	})

	t.Run("images through the CLI", func(t *testing.T) {
		out, err := n.osd("images", "list", "--format", "json")
		if err != nil || !strings.Contains(out, `"name": "openstack"`) || !strings.Contains(out, `"name": "memcached"`) {
			t.Fatalf("osd images list = %q, %v, want the catalog", out, err)
		}
		if out, err := n.osd("images", "build", "memcached"); err != nil || !strings.Contains(out, "memcached:") {
			t.Fatalf("osd images build memcached: %v\n%s", err, out)
		}
		dir := t.TempDir()
		bundle := filepath.Join(dir, "bundle.tar")
		if out, err := n.osd("images", "export", bundle, "memcached"); err != nil || !strings.Contains(out, "exported") {
			t.Fatalf("osd images export: %v\n%s", err, out)
		}
		data, err := os.ReadFile(bundle)
		if err != nil {
			t.Fatal(err)
		}
		corrupt := filepath.Join(dir, "corrupt.tar")
		bad := append([]byte(nil), data...)
		bad[len(bad)/2] ^= 0xff
		os.WriteFile(corrupt, bad, 0o600)
		if out, err := n.osd("images", "import", corrupt); err == nil || !strings.Contains(out, "corrupt") {
			t.Errorf("osd images import of a damaged bundle = %q, %v, want a refusal naming the damage", out, err)
		}
		if out, err := n.osd("images", "import", filepath.Join(dir, "missing.tar")); err == nil {
			t.Errorf("osd images import of a missing file succeeded: %s", out)
		}
		if out, err := n.osd("images", "import", bundle); err != nil || !strings.Contains(out, "imported localhost/osd/memcached") {
			t.Errorf("osd images import = %q, %v, want memcached imported", out, err)
		}
		if out, err := n.osd("images", "build", "nosuchimage"); err == nil || !strings.Contains(out, "nosuchimage") {
			t.Errorf("osd images build nosuchimage = %q, %v, want a refusal naming it", out, err)
		}
	})

	t.Run("rendered values", func(t *testing.T) {
		out, err := n.osd("config", "show", "--rendered", "keystone")
		if err != nil || !strings.Contains(out, "http11-socket") && !strings.Contains(out, "endpoints") {
			t.Errorf("osd config show --rendered keystone = %q, %v, want keystone's values", out, err)
		}
		if strings.Contains(strings.ToLower(out), "password:") {
			t.Errorf("rendered values show a password:\n%s", out)
		}
		if out, err := n.osd("config", "show", "--rendered", "nosuch"); err == nil || !strings.Contains(out, "keystone") {
			t.Errorf("osd config show --rendered nosuch = %q, %v, want an error listing the services", out, err)
		}
	})

	t.Run("join tokens and the mTLS remote API", func(t *testing.T) {
		out, err := n.osd("cluster", "add", "node2", "--ttl", "30m")
		if err != nil {
			t.Fatalf("osd cluster add node2: %v\n%s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		tok, err := cluster.DecodeToken(lines[len(lines)-1])
		if err != nil {
			t.Fatalf("token printed by osd cluster add does not decode: %v\n%s", err, out)
		}
		if tok.Name != "node2" || len(tok.Addresses) == 0 || !strings.HasSuffix(tok.Addresses[0], ":18443") || time.Until(tok.Expires) > 31*time.Minute {
			t.Errorf("token = %+v, want node2, the remote API address, 30m", tok)
		}
		if out, err := n.osd("cluster", "add", "node2"); err == nil || !strings.Contains(out, "revoke") {
			t.Errorf("second token for node2 = %q, %v, want a refusal saying to revoke", out, err)
		}
		if out, err := n.osd("cluster", "add", "Bad_Name!"); err == nil {
			t.Errorf("token for an invalid name accepted: %s", out)
		}
		if out, err := n.osd("cluster", "tokens"); err != nil || !strings.Contains(out, "node2") {
			t.Errorf("osd cluster tokens = %q, %v, want node2", out, err)
		}
		if out, err := n.osd("cluster", "revoke", "node2"); err != nil {
			t.Errorf("osd cluster revoke node2: %v\n%s", err, out)
		}

		// The remote API: pinned to the cluster CA from the token, no client certificate.
		anon, err := cluster.ClientTLSConfig(tok.Fingerprint, "127.0.0.1", nil)
		if err != nil {
			t.Fatal(err)
		}
		if code := httpsStatus(t, anon, "https://127.0.0.1:18443/1.0"); code != http.StatusUnauthorized {
			t.Errorf("GET /1.0 without a client certificate = %d, want 401", code)
		}
		// A client certificate nobody trusts, then trusted with osd trust add.
		certPEM, keyPEM := selfSignedClient(t)
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		client, err := cluster.ClientTLSConfig(tok.Fingerprint, "127.0.0.1", &pair)
		if err != nil {
			t.Fatal(err)
		}
		if code := httpsStatus(t, client, "https://127.0.0.1:18443/1.0"); code != http.StatusForbidden {
			t.Errorf("GET /1.0 with an untrusted certificate = %d, want 403", code)
		}
		certFile := filepath.Join(t.TempDir(), "client.pem")
		os.WriteFile(certFile, certPEM, 0o600)
		if out, err := n.osd("trust", "add", "automation", certFile); err != nil {
			t.Fatalf("osd trust add: %v\n%s", err, out)
		}
		if code := httpsStatus(t, client, "https://127.0.0.1:18443/1.0"); code != http.StatusOK {
			t.Errorf("GET /1.0 with a trusted certificate = %d, want 200", code)
		}
		if code := httpsStatus(t, client, "https://127.0.0.1:18443/1.0/nonexistent"); code != http.StatusNotFound {
			t.Errorf("GET /1.0/nonexistent (trusted) = %d, want 404", code)
		}
		// A server that is not this cluster is refused by the pin.
		wrongPin, _ := cluster.ClientTLSConfig(strings.Repeat("ab", 32), "127.0.0.1", &pair)
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: wrongPin}}
		if resp, err := c.Get("https://127.0.0.1:18443/1.0"); err == nil {
			resp.Body.Close()
			t.Errorf("a client pinned to another CA reached the API (status %d)", resp.StatusCode)
		}
	})

	t.Run("graceful stop leaves no processes", func(t *testing.T) {
		code, ok := n.stop(2 * time.Minute)
		if !ok || code != 0 {
			t.Fatalf("daemon stop: exited=%v code=%d, want a clean exit 0\n%s", ok, code, tail(n.log.String(), 30))
		}
		kc := k3s.Paths{StateDir: n.stateDir, RunDir: n.runDir}
		if left := processesMatching(kc.ContainerdSocket()); len(left) > 0 {
			t.Errorf("processes left after stop: %v", left)
		}
		if left := processesMatching("sleep 3600"); len(left) > 0 {
			t.Errorf("pod processes left after stop: %v", left)
		}
		if _, err := os.Stat(n.socket()); err == nil {
			t.Errorf("API socket %s left after stop", n.socket())
		}
	})

	t.Run("reset leaves nothing", func(t *testing.T) {
		out, err := n.osd("reset", "--yes")
		if err != nil {
			t.Fatalf("osd reset: %v\n%s", err, out)
		}
		for _, tool := range []string{"iptables-save", "ip6tables-save"} {
			dump, err := exec.Command(tool).Output()
			if err != nil {
				continue
			}
			for _, l := range strings.Split(string(dump), "\n") {
				if strings.Contains(l, "KUBE-") || strings.Contains(l, "CNI-") {
					t.Errorf("%s still has %q", tool, l)
					break
				}
			}
		}
		if _, err := os.Stat("/sys/class/net/" + k3s.BridgeName); err == nil {
			t.Errorf("bridge %s left after reset", k3s.BridgeName)
		}
		if ns, _ := filepath.Glob("/run/netns/cni-*"); len(ns) > 0 {
			t.Errorf("network namespaces left after reset: %v", ns)
		}
		if left := processesMatching(n.stateDir); len(left) > 0 {
			t.Errorf("processes left after reset: %v", left)
		}
		if left := processesMatching(n.runDir); len(left) > 0 {
			t.Errorf("processes left after reset: %v", left)
		}
		if _, err := os.Stat(n.stateDir); err == nil {
			t.Errorf("state dir %s left after reset", n.stateDir)
		}
		if fwd, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); string(fwd) != string(fwdBefore) {
			t.Errorf("ip_forward after reset = %q, want %q as before the test", fwd, fwdBefore)
		}
		if _, err := os.Stat("/sys/class/net/br-ex"); err == nil {
			t.Errorf("br-ex left after reset")
		}
	})
}
