package k3s

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

// writeServerCA writes a self-signed CA where p.ServerCA() reads it.
func writeServerCA(t *testing.T, p Paths) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(p.ServerCA()), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.ServerCA(), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func admitted(t *testing.T, cs kubernetes.Interface) map[string]string {
	t.Helper()
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(context.Background(), NodeAdmissionConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read %s: %v", NodeAdmissionConfigMap, err)
	}
	return cm.Data
}

// TestSyncNodeAdmission follows one name through a join, a revocation, a new join, its
// completion and its removal. The API server is client-go's fake (a second Kubernetes
// cannot run beside the host's one); what it checks is that the digest the server writes,
// from the bootstrap token's Secret, is the one the agent's kubelet labels its Node with
// (AgentArgs, from the K10 token it was handed), and what each step leaves.
func TestSyncNodeAdmission(t *testing.T) {
	ctx := context.Background()
	p := Paths{StateDir: t.TempDir(), RunDir: "/r"}
	writeServerCA(t, p)
	cs := fake.NewClientset()
	now := time.Now()
	sync := func(members []string, pending map[string]time.Time) map[string]string {
		t.Helper()
		if err := SyncNodeAdmission(ctx, cs, members, pending, now); err != nil {
			t.Fatalf("SyncNodeAdmission(%v, %v) = %v", members, pending, err)
		}
		return admitted(t, cs)
	}

	if got := sync([]string{"n1"}, nil); len(got) != 1 || got["n1"] != AdmissionMember {
		t.Fatalf("admitted with the server alone = %v, want n1 a member", got)
	}
	tok, _, err := CreateAgentToken(ctx, cs, p, "n3", 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	issued := now.Add(-time.Minute)
	got := sync([]string{"n1"}, map[string]time.Time{"n3": issued})
	args, err := AgentArgs(Config{Paths: p, NodeName: "n3"}, "https://10.0.0.1:6443", tok)
	if err != nil {
		t.Fatal(err)
	}
	label := ""
	for i, a := range args {
		if a == "--node-label" && i+1 < len(args) && len(args[i+1]) > len(JoinLabel) && args[i+1][:len(JoinLabel)+1] == JoinLabel+"=" {
			label = args[i+1][len(JoinLabel)+1:]
		}
	}
	if label == "" || got["n3"] != AdmissionJoining+joinStamp(issued)+" "+label {
		t.Fatalf("admitted during n3's join = %v, the agent labels its Node %s=%q: want n3 joining with that digest", got, JoinLabel, label)
	}

	// A Node its kubelet registered is left alone while the join is admitted; one without
	// the join's label (left by an earlier join) is deleted at the join request.
	for _, tt := range []struct {
		labels map[string]string
		kept   bool
	}{{map[string]string{JoinLabel: label}, true}, {map[string]string{JoinLabel: JoinDigest("K10x::old.old")}, false}, {nil, false}} {
		if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n3", Labels: tt.labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := DeleteStaleNode(ctx, cs, "n3"); err != nil {
			t.Fatal(err)
		}
		_, err := cs.CoreV1().Nodes().Get(ctx, "n3", metav1.GetOptions{})
		if kept := err == nil; kept != tt.kept {
			t.Errorf("DeleteStaleNode(n3 labelled %v) kept it = %v, want %v", tt.labels, kept, tt.kept)
		}
		_ = cs.CoreV1().Nodes().Delete(ctx, "n3", metav1.DeleteOptions{})
	}

	// Revoked: the name is no longer admitted and its agent token is gone.
	if got := sync([]string{"n1"}, nil); len(got) != 1 {
		t.Errorf("admitted after n3's token was revoked = %v, want only n1", got)
	}
	if left, _ := ListAgentTokens(ctx, cs); len(left) != 0 {
		t.Errorf("agent tokens after n3's revocation = %v, want none", left)
	}

	// Removed, then joining again: barred as a member, admitted only as the new join.
	if err := BarNode(ctx, cs, "n3"); err != nil {
		t.Fatal(err)
	}
	if got := sync([]string{"n1", "n3"}, nil); got["n3"] != "" {
		t.Errorf("admitted with n3 removed (barred, its record not yet gone) = %v, want n3 absent", got)
	}
	tok2, _, err := CreateAgentToken(ctx, cs, p, "n3", 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	reissued := now.Add(-10 * time.Second)
	if got := sync([]string{"n1"}, map[string]time.Time{"n3": reissued}); got["n3"] != AdmissionJoining+joinStamp(reissued)+" "+JoinDigest(tok2) || JoinDigest(tok2) == label {
		t.Errorf("admitted during n3's new join = %v, want joining with the new token's digest %s (the old one was %s)", got, JoinDigest(tok2), label)
	}
	// Completed: un-barred, a member, and its agent token is gone.
	if err := UnbarNode(ctx, cs, "n3"); err != nil {
		t.Fatal(err)
	}
	// A retry of that join (a new agent token replacing the first) keeps both digests.
	tok3, _, err := CreateAgentToken(ctx, cs, p, "n3", 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := sync([]string{"n1"}, map[string]time.Time{"n3": reissued}); got["n3"] != AdmissionJoining+joinStamp(reissued)+" "+JoinDigest(tok2)+" "+JoinDigest(tok3) {
		t.Errorf("admitted after a retry of n3's join = %v, want both attempts' digests", got)
	}
	if got := sync([]string{"n1", "n3"}, nil); got["n3"] != AdmissionMember {
		t.Errorf("admitted after n3's join completed = %v, want n3 a member", got)
	}
	if left, _ := ListAgentTokens(ctx, cs); len(left) != 0 {
		t.Errorf("agent tokens after n3's join completed = %v, want none", left)
	}
}
