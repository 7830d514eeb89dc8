package test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/cluster"
	"github.com/osdcloud/osd/daemon/k3s"
)

// mintKubelet asks the k3s supervisor at server (https://host:6443), from inside n's
// network, for a kubelet client certificate for node name with agent credential creds
// (the id.secret of a bootstrap token), the way issue 35 found it: a GET with the header
// k3s-Node-Name, whose answer holds the certificate, the CA and the key. It returns the
// file holding them ("" when the supervisor refused, with its answer).
func mintKubelet(t *testing.T, n *nsNode, server, creds, name string) (string, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubelet-"+name+".pem")
	out, err := n.nsenter("curl", "-sk", "--max-time", "30", "-o", p, "-w", "%{http_code}",
		"-H", "Authorization: Bearer "+creds, "-H", "k3s-Node-Name: "+name, "-H", "k3s-Node-Password: osd-e2e-"+name,
		server+"/v1-k3s/client-kubelet.crt").Output()
	if err != nil || string(out) != "200" {
		b, _ := os.ReadFile(p)
		return "", string(out) + " " + string(b)
	}
	if b, err := os.ReadFile(p); err != nil || !strings.Contains(string(b), "PRIVATE KEY") {
		return "", "no key in the answer: " + string(b)
	}
	return p, ""
}

// createNode creates (or, with update, replaces) Node name with labels on n1's API
// server, from inside n's network, authenticating with the kubelet certificate pem.
func createNode(t *testing.T, n1, n *nsNode, pem, name string, labels map[string]string) (string, error) {
	t.Helper()
	node, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": name, "labels": labels}})
	kubectl := filepath.Join(n1.stateDir(), "bin", "kubectl")
	empty := writeSecret(t, "apiVersion: v1\nkind: Config\n")
	out, err := n.nsenter(kubectl, "--kubeconfig", empty, "--server", "https://"+n1.ip+":6443", "--insecure-skip-tls-verify",
		"--client-certificate", pem, "--client-key", pem, "create", "-f", writeSecret(t, string(node))).CombinedOutput()
	return string(out), err
}

// checkJoinBoundToName plays a joiner handed a token for osdt-n4 that goes beyond it
// (issue 35, item 3): with the agent credential of its join it mints kubelet
// certificates for another name (k3s's supervisor cannot bind a bootstrap token to a
// name: it signs them) and for its own; the API server refuses a Node of the other name,
// and of its own without the join's label; the join's own kubelet (with the label)
// registers. Revoking the token deletes that Node and leaves nothing that registers one.
func checkJoinBoundToName(t *testing.T, n1, n2 *nsNode) {
	tok, err := cluster.DecodeToken(addToken(t, n1, "osdt-n4", "compute"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := cluster.NewMemberKey(tok.Name)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(api.JoinRequest{Name: tok.Name, Secret: tok.Secret, Address: "10.99.0.4:8443", CSR: key.CSRPEM})
	out, err := n2.nsenter("curl", "-sk", "--max-time", "30", "-H", "Content-Type: application/json", "--data-binary", "@"+writeSecret(t, string(body)),
		"https://"+tok.Addresses[0]+"/1.0/cluster/join").Output()
	var env struct {
		Metadata api.JoinResponse `json:"metadata"`
	}
	if err != nil || json.Unmarshal(out, &env) != nil || env.Metadata.K3sToken == "" {
		t.Fatalf("POST cluster/join as osdt-n4 = %s, %v, want the join credentials", out, err)
	}
	_, creds, _ := strings.Cut(env.Metadata.K3sToken, "::")
	server := "https://" + n1.ip + ":6443"
	joinLabel := map[string]string{k3s.JoinLabel: k3s.JoinDigest(env.Metadata.K3sToken)}

	other, refusal := mintKubelet(t, n2, server, creds, "osdt-n4b")
	if other == "" {
		t.Logf("the supervisor refused a kubelet certificate for osdt-n4b with osdt-n4's agent credential: %s", refusal)
	} else {
		for _, labels := range []map[string]string{nil, joinLabel} {
			if out, err := createNode(t, n1, n2, other, "osdt-n4b", labels); err == nil || !strings.Contains(out, "not a member of the osd cluster") {
				t.Errorf("creating Node osdt-n4b (labels %v) with a kubelet certificate minted by osdt-n4's join = %q, %v, want it denied", labels, out, err)
			}
		}
	}
	own, refusal := mintKubelet(t, n2, server, creds, tok.Name)
	if own == "" {
		t.Fatalf("minting osdt-n4's own kubelet certificate during its join: %s, want one (the join's agent needs it)", refusal)
	}
	if out, err := createNode(t, n1, n2, own, tok.Name, nil); err == nil || !strings.Contains(out, "not the one its join started") {
		t.Errorf("creating Node osdt-n4 without the join's label during its join = %q, %v, want it denied", out, err)
	}
	if out, err := createNode(t, n1, n2, own, tok.Name, joinLabel); err != nil {
		t.Errorf("creating Node osdt-n4 with the join's label during its join (what its agent does) = %q, %v, want it created", out, err)
	}

	if out, err := n1.osd(time.Minute, "cluster", "revoke", tok.Name); err != nil {
		t.Fatalf("osd cluster revoke %s: %v\n%s", tok.Name, err, out)
	}
	if out, err := n1.osd(time.Minute, "kubectl", "get", "node", tok.Name); err == nil || !strings.Contains(out, "NotFound") {
		t.Errorf("kubectl get node %s after its join was revoked = %q, %v, want NotFound", tok.Name, out, err)
	}
	for _, pem := range []string{own, other} {
		if pem == "" {
			continue
		}
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(pem), "kubelet-"), ".pem")
		if out, err := createNode(t, n1, n2, pem, name, joinLabel); err == nil || !strings.Contains(out, "not a member of the osd cluster") {
			t.Errorf("creating Node %s with a kubelet certificate of osdt-n4's revoked join = %q, %v, want it denied", name, out, err)
		}
	}
	if got, _ := mintKubelet(t, n2, server, creds, "osdt-n4c"); got != "" {
		// The API server caches a token's authentication for ten seconds.
		time.Sleep(15 * time.Second)
		if got, _ := mintKubelet(t, n2, server, creds, "osdt-n4c"); got != "" {
			t.Errorf("the supervisor still signs kubelet certificates with osdt-n4's revoked agent credential")
		}
	}
}

// keptKubeletCert copies the kubelet certificate and key node 2 keeps after its removal
// (before its reset deletes them) into one PEM file for checkReaddStaysBarred.
func keptKubeletCert(t *testing.T, n2 *nsNode) string {
	kept := writeSecret(t, "")
	agent := filepath.Join(n2.stateDir(), "k3s", "agent")
	var pem []byte
	for _, f := range []string{"client-kubelet.crt", "client-kubelet.key"} {
		b, err := os.ReadFile(filepath.Join(agent, f))
		if err != nil {
			t.Fatal(err)
		}
		pem = append(pem, b...)
	}
	if err := os.WriteFile(kept, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	return kept
}

// checkReaddStaysBarred: after osd cluster add of the removed node 2's name, and while a
// new join of it is under way, the kubelet certificate node 2 kept (kept, from
// keptKubeletCert) still cannot create its Node; only the new join's kubelet could. The
// certificate is tried from node 1 itself: the firewall closes node 1's API to the removed
// node's address. The token is revoked afterwards.
func checkReaddStaysBarred(t *testing.T, n1, n2 *nsNode, kept string) {
	tok, err := cluster.DecodeToken(addToken(t, n1, n2.name, "control"))
	if err != nil {
		t.Fatal(err)
	}
	defer n1.osd(time.Minute, "cluster", "revoke", n2.name)
	if out, err := createNode(t, n1, n1, kept, n2.name, nil); err == nil || !strings.Contains(out, "removed from the osd cluster") {
		t.Errorf("creating its Node with the removed node's kubelet certificate after osd cluster add %s = %q, %v, want it denied", n2.name, out, err)
	}
	key, err := cluster.NewMemberKey(tok.Name)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(api.JoinRequest{Name: tok.Name, Secret: tok.Secret, Address: "10.99.0.2:8443", CSR: key.CSRPEM})
	out, err := n2.nsenter("curl", "-sk", "--max-time", "30", "-H", "Content-Type: application/json", "--data-binary", "@"+writeSecret(t, string(body)),
		"https://"+tok.Addresses[0]+"/1.0/cluster/join").Output()
	if err != nil || !strings.Contains(string(out), "k3s_token") {
		t.Fatalf("POST cluster/join as %s again = %s, %v, want the join credentials", n2.name, out, err)
	}
	if out, err := createNode(t, n1, n1, kept, n2.name, nil); err == nil || !strings.Contains(out, "not the one its join started") {
		t.Errorf("creating its Node with the removed node's kubelet certificate during a new join of %s = %q, %v, want it denied", n2.name, out, err)
	}
}
