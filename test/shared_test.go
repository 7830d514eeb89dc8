package test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/deploy"
)

// The shared cloud: deployed once per test binary by the first test that asks for it
// (sharedCloud), torn down by TestMain (or earlier by teardownShared). See doc.go.
var shared struct {
	mu       sync.Mutex
	tried    bool           // a deployment was attempted
	node     *node          // the deployed cloud (nil when not deployed or torn down)
	err      error          // why the deployment failed
	broken   string         // a destructive group left the cloud unusable: why
	baseline map[string]int // OVN northbound row counts right after the deployment
	releases string         // Helm release revisions right after the deployment
	took     time.Duration  // deployment, kill and re-converge included
	down     bool           // torn down

	group      string    // the end-to-end group running now ("" between groups)
	groupStart time.Time // when it started
	timings    []string  // the groups done, with their times
}

// allReleases are the Helm releases every deployed cloud has (optional ones, e.g. for
// storage, come on top); each release of the deployment must be Ready.
var allReleases = []string{"coredns", "mariadb", "rabbitmq", "memcached", "keystone", "glance", "placement", "ovn", "neutron", "nova", "heat", "horizon"}

// sharedCloud returns the cloud every end-to-end test uses, deploying it on first use
// (osd init killed mid-deployment, restarted and re-converged: that is part of the
// test). A failed deployment fails every test that asks for it, with the reason.
func sharedCloud(t *testing.T) *node {
	t.Helper()
	requireE2E(t)
	deployMu.Lock()
	defer deployMu.Unlock()
	shared.mu.Lock()
	tried := shared.tried
	shared.tried = true
	shared.mu.Unlock()
	if !tried {
		t0 := time.Now()
		err := deployShared(t)
		shared.mu.Lock()
		shared.err, shared.took = err, time.Since(t0)
		if err != nil && shared.node != nil {
			t.Log(shared.node.logTails())
		}
		shared.mu.Unlock()
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	switch {
	case shared.err != nil:
		t.Fatalf("the shared cloud could not be deployed: %v", shared.err)
	case shared.down:
		t.Fatal("the shared cloud was torn down already (a test that needs the host to itself ran after the end-to-end tests: see doc.go)")
	case shared.broken != "":
		t.Fatalf("the shared cloud is unusable: %s", shared.broken)
	}
	return shared.node
}

// deployMu serializes deployments (shared.mu is not held during one, so that a signal or
// the timeout can tear a deployment down).
var deployMu sync.Mutex

// markBroken records that the shared cloud can no longer serve tests (a destructive
// group failed to bring it back); every later sharedCloud call fails with the reason.
func markBroken(reason string) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.broken == "" {
		shared.broken = reason
	}
}

// deployShared runs osd init on a fresh state dir, kills the daemon (SIGKILL) once a Helm
// release of the deployment exists, restarts it and runs osd init again, then checks
// that every release is Ready and records the OVN baseline the audit compares with.
// The node is shared.node from its creation, so that teardown resets what it made even
// when the deployment fails.
func deployShared(t *testing.T) error {
	n, err := makeNode(osdBin(t))
	if err != nil {
		return err
	}
	shared.mu.Lock()
	shared.node = n
	shared.mu.Unlock()
	interruptTeardown()
	startArgvSampler() // every command line from here on (checkNoSecretInArgv)
	if err := n.startDaemon(); err != nil {
		return err
	}
	t0 := time.Now()
	first := exec.Command(n.bin, append(n.globalArgs(), "init")...)
	firstOut := &strings.Builder{}
	first.Stdout, first.Stderr = firstOut, firstOut
	if err := first.Start(); err != nil {
		return err
	}
	killed := false
	for deadline := time.Now().Add(45 * time.Minute); time.Now().Before(deadline) && !killed; time.Sleep(time.Second) {
		var dep deploy.DeploymentStatus
		if n.query("deployment", &dep) != nil {
			continue
		}
		for _, ch := range dep.Children {
			if ch.Revision > 0 {
				t.Logf("deploy: killing the daemon mid-deployment after %s: %v", time.Since(t0).Round(time.Second), summarize(dep))
				n.cmd.Process.Signal(syscall.SIGKILL)
				<-n.exited
				n.cmd = nil
				killed = true
				break
			}
		}
	}
	if !killed {
		first.Process.Kill()
		first.Wait()
		return fmt.Errorf("the deployment never started within 45 minutes:\n%s", firstOut)
	}
	if err := first.Wait(); err == nil {
		return fmt.Errorf("osd init succeeded although its daemon was killed:\n%s", firstOut)
	}
	// The restarted daemon converges by itself (the host was initialized); osd init follows.
	if err := n.startDaemon(); err != nil {
		return err
	}
	t1 := time.Now()
	out, err := n.osd("init", "--timeout", "60m", "--profile") // the whole cloud on 2 shared cores: 5 to 40 minutes measured
	if err != nil {
		return fmt.Errorf("osd init after the kill: %w\n%s", err, out)
	}
	t.Logf("deploy: osd init after the kill converged in %s (deployment total %s):\n%s", time.Since(t1).Round(time.Second), time.Since(t0).Round(time.Second), out)
	var dep deploy.DeploymentStatus
	if err := n.query("deployment", &dep); err != nil {
		return err
	}
	var notReady []string
	for _, svc := range allReleases {
		if _, ok := dep.Children[svc]; !ok {
			notReady = append(notReady, svc+" missing")
		}
	}
	for svc, ch := range dep.Children {
		if ch.State != deploy.StateReady {
			notReady = append(notReady, fmt.Sprintf("%s=%+v", svc, ch))
		}
	}
	if len(notReady) > 0 {
		return fmt.Errorf("releases not ready after osd init: %s", strings.Join(notReady, ", "))
	}
	// Nova's metadata API lists security groups as the nova service user, and Neutron makes
	// the default security group of a project the first time it lists that project's
	// groups: project service gets one when the first guest reads its metadata. Make it
	// now, so that the audit compares only what the tests create and delete.
	if out, err := n.openstack("security", "group", "list", "--project", "service", "-f", "value", "-c", "ID"); err != nil {
		return fmt.Errorf("openstack security group list: %w\n%s", err, out)
	}
	baseline, err := n.ovnCountsErr()
	if err != nil {
		return err
	}
	shared.mu.Lock()
	shared.baseline, shared.releases = baseline, revisions(dep)
	shared.mu.Unlock()
	return nil
}

// teardownShared stops the shared cloud's daemon and resets the host (osd reset), once.
// failed adds the logs' tails to the output. It is safe to call from any goroutine.
func teardownShared(why string, failed bool) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	n := shared.node
	if n == nil || shared.down {
		return
	}
	shared.down = true
	t0 := time.Now()
	fmt.Printf("shared cloud: tearing down (%s)\n", why)
	if _, ok := n.stop(2 * time.Minute); !ok {
		fmt.Println("shared cloud: the daemon did not stop within 2 minutes: killed")
	}
	if failed {
		fmt.Print(n.logTails())
	}
	if err := n.reset(); err != nil {
		fmt.Printf("shared cloud: %v\n", err)
		return
	}
	fmt.Printf("shared cloud: reset in %s\n", time.Since(t0).Round(time.Second))
}

// hostToItself is called by tests that run osd in the host's own namespaces without the
// shared cloud (ports 6443 and 10250, /run/k3s, br-ex, OVS, libvirt): they must run before
// the shared cloud is deployed, and fail saying so otherwise. Benchmarks run after every
// test: for them the shared cloud is torn down first.
func hostToItself(tb testing.TB) {
	tb.Helper()
	shared.mu.Lock()
	up := shared.node != nil && !shared.down
	shared.mu.Unlock()
	if !up {
		return
	}
	if _, ok := tb.(*testing.B); ok {
		teardownShared(tb.Name()+" needs the host to itself", false)
		return
	}
	tb.Fatalf("%s runs osd on the host itself, but the shared cloud is deployed: such a test must run before the first end-to-end test (go test runs a package's tests in the order of its files' names: see doc.go)", tb.Name())
}

var interruptOnce sync.Once

// interruptTeardown makes SIGINT and SIGTERM tear the shared cloud down before the test
// binary exits.
func interruptTeardown() {
	interruptOnce.Do(func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
		go func() {
			s := <-ch
			teardownShared("signal "+s.String(), true)
			os.Exit(2)
		}()
	})
}

// testDeadline reads OSD_TEST_DEADLINE: the Unix time (seconds) by which the test binary must
// have exited, set by whoever kills it then (.ci/run sets it from CI's time limit). Empty is
// no deadline.
func testDeadline(v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	sec, err := strconv.ParseInt(v, 10, 64)
	if err != nil || sec <= 0 {
		return time.Time{}, fmt.Errorf("OSD_TEST_DEADLINE=%q: want the Unix time in seconds by which the tests must have ended (e.g. $(( $(date +%%s) + 3600 )))", v)
	}
	return time.Unix(sec, 0), nil
}

// deadlineMargin is what tearing the shared cloud down, reporting and exiting may take.
const deadlineMargin = 3 * time.Minute

// teardownBefore tears the shared cloud down a margin before the binary's -timeout ends
// (the testing package then exits without running any cleanup). When the deadline
// (OSD_TEST_DEADLINE) comes first, the binary ends by itself deadlineMargin before it:
// it names the group still running and fails, so that whoever would have killed it sees
// why it took so long. It returns a stop function.
func teardownBefore(start time.Time, timeout time.Duration, deadline time.Time) func() {
	var timers []*time.Timer
	if timeout > 0 {
		margin := min(5*time.Minute, timeout/10)
		timers = append(timers, time.AfterFunc(start.Add(timeout-margin).Sub(time.Now()), func() {
			teardownShared(fmt.Sprintf("the test binary's -timeout %s ends in %s", timeout, margin), true)
		}))
	}
	if !deadline.IsZero() && (timeout <= 0 || deadline.Before(start.Add(timeout))) {
		timers = append(timers, time.AfterFunc(time.Until(deadline.Add(-deadlineMargin)), func() {
			fmt.Print(deadlineReport(time.Now(), deadline))
			teardownShared("OSD_TEST_DEADLINE", true)
			os.Exit(2)
		}))
	}
	return func() {
		for _, tm := range timers {
			tm.Stop()
		}
	}
}

// deadlineReport is what the binary prints when OSD_TEST_DEADLINE ends it: a failure line
// for the end-to-end group still running (test/failures.sh repeats it) and the groups' times.
func deadlineReport(now, deadline time.Time) string {
	shared.mu.Lock()
	group, since, done := shared.group, shared.groupStart, append([]string(nil), shared.timings...)
	deploying, took := shared.tried && shared.took == 0, shared.took
	shared.mu.Unlock()
	running, name := "no end-to-end group (a test of its own, before or after them)", "OSD_TEST_DEADLINE"
	switch {
	case deploying:
		running, name = "the shared cloud's deployment", "TestOpenStackE2E"
	case group != "":
		running = fmt.Sprintf("the end-to-end group %q, running for %s", group, now.Sub(since).Round(time.Second))
		name = "TestOpenStackE2E/" + strings.ReplaceAll(group, " ", "_")
	}
	if took > 0 {
		running += fmt.Sprintf("; the deployment took %s", took.Round(time.Second))
	}
	if len(done) == 0 {
		done = []string{"none"}
	}
	// The message is placed as the testing package places a test's (file.go:N:, indented).
	_, file, line, _ := runtime.Caller(0)
	var b strings.Builder
	fmt.Fprintf(&b, "--- FAIL: %s (deadline)\n", name)
	fmt.Fprintf(&b, "    %s:%d: OSD_TEST_DEADLINE (%s) is %s away: the tests are stopped; still running: %s; end-to-end groups done: %s\n",
		filepath.Base(file), line, deadline.UTC().Format(time.RFC3339), deadline.Sub(now).Round(time.Second), running, strings.Join(done, ", "))
	return b.String()
}

// A stage orders the groups of the end-to-end test.
type stage int

const (
	// stageCheck groups use the cloud and delete what they create; they run first.
	stageCheck stage = iota
	// stageAudit groups check what the check groups left behind (nothing) and that a
	// re-run of osd init changes nothing.
	stageAudit
	// stageDestructive groups stop, kill, cut or upgrade part of the cloud (a power cut,
	// a package upgrade). They run last, and must leave the cloud converged or call
	// markBroken, after which the remaining ones are skipped with the reason.
	stageDestructive
)

func (s stage) String() string {
	return [...]string{"check", "audit", "destructive"}[s]
}

// An e2eGroup is a named set of checks against the shared cloud, one subtest of
// TestOpenStackE2E.
type e2eGroup struct {
	name  string
	stage stage
	run   func(t *testing.T, n *node)
}

var e2eGroups []e2eGroup

// registerE2E adds a group to TestOpenStackE2E (call it from an init function). Groups
// run by stage, then in the order they were registered (file names, then source order).
func registerE2E(name string, s stage, run func(t *testing.T, n *node)) {
	for _, g := range e2eGroups {
		if g.name == name {
			panic("two end-to-end groups named " + name)
		}
	}
	e2eGroups = append(e2eGroups, e2eGroup{name: name, stage: s, run: run})
}

// orderedGroups is the groups in the order they run.
func orderedGroups(gs []e2eGroup) []e2eGroup {
	out := append([]e2eGroup(nil), gs...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].stage < out[j].stage })
	return out
}

// runGroups runs every group as a subtest against n and logs how long each took. A
// destructive group that fails marks the cloud broken unless it did so itself.
func runGroups(t *testing.T, n *node) {
	var timings []string
	for _, g := range orderedGroups(e2eGroups) {
		g := g
		t0 := time.Now()
		shared.mu.Lock()
		shared.group, shared.groupStart = g.name, t0
		shared.mu.Unlock()
		ran := t.Run(g.name, func(t *testing.T) {
			shared.mu.Lock()
			broken := shared.broken
			shared.mu.Unlock()
			if broken != "" {
				t.Skipf("the shared cloud is unusable: %s", broken)
			}
			g.run(t, n)
		})
		timings = append(timings, fmt.Sprintf("%s (%s) %s", g.name, g.stage, time.Since(t0).Round(time.Second)))
		shared.mu.Lock()
		shared.group, shared.timings = "", append([]string(nil), timings...)
		shared.mu.Unlock()
		if !ran && g.stage == stageDestructive {
			markBroken("destructive group " + g.name + " failed")
		}
	}
	t.Logf("end-to-end timings: deployment %s; %s", shared.took.Round(time.Second), strings.Join(timings, ", "))
}

// ovnCountsErr counts the rows of ovnTables in the running OVN northbound database.
func (n *node) ovnCountsErr() (map[string]int, error) {
	var script strings.Builder
	for _, tb := range ovnTables {
		fmt.Fprintf(&script, "echo %s $(ovn-nbctl --db=unix:/run/ovn/ovnnb_db.sock --bare --columns=_uuid list %s | grep -c .);", tb, tb)
	}
	out, err := n.kubectl("-n", "openstack", "exec", "deploy/ovn-central", "-c", "northd", "--", "sh", "-c", script.String())
	if err != nil {
		return nil, fmt.Errorf("count OVN rows: %w\n%s", err, out)
	}
	counts := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var name string
		var c int
		if _, err := fmt.Sscanf(l, "%s %d", &name, &c); err == nil {
			counts[name] = c
		}
	}
	if len(counts) != len(ovnTables) {
		return nil, errors.New("OVN row counts: " + fmt.Sprint(counts) + " from " + out)
	}
	return counts, nil
}
