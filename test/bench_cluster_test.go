package test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/api"
)

func requireClusterBench(b *testing.B) {
	b.Helper()
	if os.Getenv("OSD_BENCH") == "" {
		b.Skip("set OSD_BENCH=1 (and OSD_E2E=1) to run the cluster benchmarks")
	}
	requireCluster(b)
}

// memberReady waits until n1 lists n2 as a member with a Ready node.
func memberReady(b *testing.B, n1, n2 *nsNode, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, m := range members(b, n1) {
			if m.Name == n2.name && m.NodeState == api.NodeReady {
				return
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	b.Fatalf("%s not a Ready member after %s", n2.name, timeout)
}

// BenchmarkJoinToReady measures a join from the token to a member whose k3s node is
// Ready (osd join of a control node, in its own namespaces, against a node that ran
// osd init --kubernetes-only). One join per run: make bench runs it once (-benchtime 1x).
func BenchmarkJoinToReady(b *testing.B) {
	requireClusterBench(b)
	n1, n2 := twoNodes(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i > 0 {
			b.Skip("one join per node pair")
		}
		t0 := time.Now()
		_, _ = join(b, n1, n2, "control")
		memberReady(b, n1, n2, time.Minute)
		b.ReportMetric(time.Since(t0).Seconds(), "s/join")
	}
}

// BenchmarkJoinRetryAfterKill kills the joining node's daemon (SIGKILL) once its join
// started the k3s agent, starts it again, and measures how long the resumed join (the
// daemon resumes at start; osd join with the same token follows it) takes to a Ready
// member. The token stays usable until the join completes.
func BenchmarkJoinRetryAfterKill(b *testing.B) {
	requireClusterBench(b)
	n1, n2 := twoNodes(b)
	out, err := n1.osd(time.Minute, "cluster", "add", n2.name, "--ttl", "10m", "--role", "control")
	if err != nil {
		b.Fatalf("osd cluster add: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	token := lines[len(lines)-1]
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i > 0 {
			b.Skip("one join per node pair")
		}
		joined := make(chan string, 1)
		go func() {
			out, _ := n2.osd(10*time.Minute, "join", token)
			joined <- out
		}()
		// Kill once the agent has started (its kubelet credentials appear).
		kubelet := filepath.Join(n2.stateDir(), "k3s", "agent", "kubelet.kubeconfig")
		deadline := time.Now().Add(5 * time.Minute)
		for {
			if _, err := os.Stat(kubelet); err == nil {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("the k3s agent of %s did not start within 5 minutes", n2.name)
			}
			time.Sleep(100 * time.Millisecond)
		}
		killedAt := time.Now()
		syscall.Kill(-n2.daemon.Process.Pid, syscall.SIGKILL)
		<-n2.exited
		n2.daemon = nil
		b.Logf("osd join output when its daemon was killed:\n%s", <-joined)
		var tokState string
		for _, tk := range tokens(b, n1) {
			if tk.Name == n2.name {
				tokState = tk.State
			}
		}
		if tokState != api.TokenPending {
			b.Fatalf("token for %s after the killed join is %q, want pending (usable)", n2.name, tokState)
		}
		restart := time.Now()
		n2.start()
		if out, err := n2.osd(10*time.Minute, "join", token); err != nil {
			b.Fatalf("osd join after the kill: %v\n%s", err, out)
		}
		memberReady(b, n1, n2, 2*time.Minute)
		b.ReportMetric(time.Since(restart).Seconds(), "s/resume")
		b.ReportMetric(time.Since(killedAt).Seconds(), "s/kill-to-ready")
	}
}

// tokens is osd cluster tokens on n.
func tokens(b *testing.B, n *nsNode) []api.TokenInfo {
	b.Helper()
	out, err := n.osd(time.Minute, "cluster", "tokens", "--format", "json")
	if err != nil {
		b.Fatalf("osd cluster tokens: %v\n%s", err, out)
	}
	var list []api.TokenInfo
	if err := jsonUnmarshal(out, &list); err != nil {
		b.Fatalf("osd cluster tokens: %v\n%s", err, out)
	}
	return list
}
