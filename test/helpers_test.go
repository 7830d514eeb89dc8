package test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/api"
)

// osdBin is the binary under test.
func osdBin(t testing.TB) string {
	t.Helper()
	p := os.Getenv("OSD_BIN")
	if p == "" {
		p = "../bin/osd"
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(abs); err != nil {
		t.Skipf("osd binary %s not built (run make build or set OSD_BIN)", abs)
	}
	return abs
}

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if testing.Short() {
		t.Skip("integration test skipped in -short mode")
	}
}

// node is one osd daemon under test, with its own state and run dirs.
type node struct {
	t        testing.TB // nil for the shared cloud's node (it outlives every test)
	bin      string
	base     string // holds stateDir and runDir
	stateDir string
	runDir   string
	cmd      *exec.Cmd
	exited   chan struct{}
	log      *lockedBuffer
}

// newNode makes a node for one test: the test's cleanup stops its daemon and resets the host.
func newNode(t testing.TB) *node {
	t.Helper()
	n, err := makeNode(osdBin(t))
	if err != nil {
		t.Fatal(err)
	}
	n.t = t
	t.Cleanup(func() {
		n.stop(2 * time.Minute)
		if t.Failed() {
			n.dumpLogs()
		}
		if err := n.reset(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return n
}

// makeNode makes a node with fresh state and run dirs under a new temporary base dir.
func makeNode(bin string) (*node, error) {
	base, err := os.MkdirTemp("", "osd-test-")
	if err != nil {
		return nil, err
	}
	return &node{bin: bin, base: base, stateDir: filepath.Join(base, "state"), runDir: filepath.Join(base, "run"), log: &lockedBuffer{}}, nil
}

// reset runs osd reset on the node's dirs and removes its base dir.
func (n *node) reset() error {
	out, err := n.osd("reset", "--yes")
	os.RemoveAll(n.base)
	if err != nil {
		return fmt.Errorf("osd reset: %w\n%s", err, out)
	}
	return nil
}

// lockedBuffer is a bytes.Buffer safe for the daemon's output copier and readers at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (n *node) globalArgs() []string {
	return []string{"--state-dir", n.stateDir, "--run-dir", n.runDir}
}

// osd runs the CLI against this node and returns its combined output. The CLI is killed
// after 5 minutes, or after the duration of a --timeout flag it is given plus a minute.
func (n *node) osd(args ...string) (string, error) {
	limit := 5 * time.Minute
	for i, a := range args {
		if a == "--timeout" && i+1 < len(args) {
			if d, err := time.ParseDuration(args[i+1]); err == nil && d+time.Minute > limit {
				limit = d + time.Minute
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, n.bin, append(n.globalArgs(), withTestRelease(args)...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// start runs `osd daemon` in the background.
func (n *node) start(extra ...string) {
	n.t.Helper()
	if err := n.startDaemon(extra...); err != nil {
		n.t.Fatal(err)
	}
}

// startDaemon runs `osd daemon` in the background, in its own process group.
// OSD_CACHE_DIR, when set, is every daemon's image and package cache (--cache-dir) unless
// extra names one, as it is the image and chart tests' cache: they build the images there
// and the daemons find them.
func (n *node) startDaemon(extra ...string) error {
	if dir := os.Getenv("OSD_CACHE_DIR"); dir != "" && !slices.Contains(extra, "--cache-dir") {
		extra = append(extra, "--cache-dir", dir)
	}
	cmd := exec.Command(n.bin, append(append(n.globalArgs(), "daemon"), extra...)...)
	cmd.Stdout, cmd.Stderr = n.log, n.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start daemon: %w", err)
	}
	n.cmd = cmd
	n.exited = make(chan struct{})
	go func() { cmd.Wait(); close(n.exited) }()
	return nil
}

// stop sends SIGTERM and waits; it reports whether the daemon exited in time.
func (n *node) stop(timeout time.Duration) (exitCode int, ok bool) {
	if n.cmd == nil {
		return 0, true
	}
	defer func() { n.cmd = nil }()
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
		return n.cmd.ProcessState.ExitCode(), true
	case <-time.After(timeout):
		syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
		<-n.exited
		return -1, false
	}
}

func (n *node) socket() string { return filepath.Join(n.runDir, "osd.sock") }

// httpClient talks HTTP over the node's unix socket.
func (n *node) httpClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", n.socket())
		},
	}}
}

// info asks GET /1.0.
func (n *node) info() (api.ServerInfo, error) {
	var info api.ServerInfo
	resp, err := n.httpClient().Get("http://osd/1.0")
	if err != nil {
		return info, err
	}
	defer resp.Body.Close()
	var env api.Response
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return info, err
	}
	if env.Type != api.SyncResponse {
		return info, fmt.Errorf("GET /1.0: %d %s", env.StatusCode, env.Error)
	}
	return info, env.MetadataAs(&info)
}

// waitNodeReady waits until the node is Ready and returns how long that took.
func (n *node) waitNodeReady(timeout time.Duration) time.Duration {
	n.t.Helper()
	start := time.Now()
	var last api.ServerInfo
	for time.Since(start) < timeout {
		select {
		case <-n.exited:
			n.t.Fatalf("daemon exited while waiting for the node: %s", n.log.String())
		default:
		}
		if info, err := n.info(); err == nil {
			last = info
			if info.Kubernetes.NodeReady {
				return time.Since(start)
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	n.t.Fatalf("node not Ready after %s: %+v", timeout, last.Kubernetes)
	return 0
}

func (n *node) kubectl(args ...string) (string, error) {
	return n.osd(append([]string{"kubectl"}, args...)...)
}

func (n *node) dumpLogs() { n.t.Log(n.logTails()) }

// logTails is the end of the daemon's output and of its k3s and containerd logs.
func (n *node) logTails() string {
	var b strings.Builder
	fmt.Fprintf(&b, "daemon output:\n%s\n", tail(n.log.String(), 60))
	if l, err := os.ReadFile(filepath.Join(n.stateDir, "logs", "k3s.log")); err == nil {
		fmt.Fprintf(&b, "k3s.log (tail):\n%s\n", tail(string(l), 80))
	}
	if l, err := os.ReadFile(filepath.Join(n.stateDir, "logs", "containerd.log")); err == nil {
		fmt.Fprintf(&b, "containerd.log (tail):\n%s\n", tail(string(l), 40))
	}
	return b.String()
}

func tail(s string, lines int) string {
	l := strings.Split(s, "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// processesMatching lists PIDs whose command line contains s.
func processesMatching(s string) []string {
	var found []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(b) == 0 {
			continue
		}
		cl := string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		if strings.Contains(cl, s) && e.Name() != fmt.Sprint(os.Getpid()) {
			found = append(found, e.Name()+": "+cl)
		}
	}
	return found
}

// httpsStatus makes a GET with cfg and returns the status code (0 when the request failed).
func httpsStatus(t testing.TB, cfg *tls.Config, url string) int {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	resp, err := c.Get(url)
	if err != nil {
		t.Logf("GET %s: %v", url, err)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// selfSignedClient makes a client certificate and key (PEM) no cluster has issued.
func selfSignedClient(t testing.TB) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "automation"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// withTestRelease adds --release OSD_TEST_RELEASE to an osd init's args when the variable
// is set (make test-epoxy): every cloud the tests deploy then runs that release, and
// re-runs ask for the release the cloud has.
func withTestRelease(args []string) []string {
	rel := os.Getenv("OSD_TEST_RELEASE")
	if rel == "" || len(args) == 0 || args[0] != "init" || slices.Contains(args, "--kubernetes-only") {
		return args
	}
	return append(append([]string(nil), args...), "--release", rel)
}
