package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestTestDeadline(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Time
		err  bool
	}{
		{"", time.Time{}, false},
		{"1900000000", time.Unix(1900000000, 0), false},
		{"soon", time.Time{}, true},
		{"-5", time.Time{}, true},
		{"0", time.Time{}, true},
		{"1900000000.5", time.Time{}, true},
	} {
		got, err := testDeadline(tc.in)
		if (err != nil) != tc.err || !got.Equal(tc.want) {
			t.Errorf("testDeadline(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// TestDeadlineReport: the report names the group running and the groups done, in the form
// test/failures.sh repeats at the end of a log.
func TestDeadlineReport(t *testing.T) {
	shared.mu.Lock()
	saved := struct {
		tried      bool
		took       time.Duration
		group      string
		groupStart time.Time
		timings    []string
	}{shared.tried, shared.took, shared.group, shared.groupStart, shared.timings}
	now := time.Unix(1900000000, 0)
	shared.tried, shared.took = true, 4*time.Minute
	shared.group, shared.groupStart = "power cut", now.Add(-7*time.Minute)
	shared.timings = []string{"servers (check) 50s", "heat (check) 35s"}
	shared.mu.Unlock()
	t.Cleanup(func() {
		shared.mu.Lock()
		shared.tried, shared.took, shared.group, shared.groupStart, shared.timings = saved.tried, saved.took, saved.group, saved.groupStart, saved.timings
		shared.mu.Unlock()
	})

	report := deadlineReport(now, now.Add(3*time.Minute))
	for _, want := range []string{
		"--- FAIL: TestOpenStackE2E/power_cut (deadline)\n",
		`still running: the end-to-end group "power cut", running for 7m0s`,
		"the deployment took 4m0s",
		"end-to-end groups done: servers (check) 50s, heat (check) 35s",
		"is 3m0s away",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q:\n%s", want, report)
		}
	}

	// failures.sh repeats the failure line and its message.
	log := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(log, []byte("=== RUN   TestOpenStackE2E\n"+report+"FAIL\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", "failures.sh", log).CombinedOutput()
	if err != nil {
		t.Fatalf("failures.sh: %v\n%s", err, out)
	}
	if want := "--- what failed (repeated from above)\n" + report; string(out) != want {
		t.Errorf("failures.sh printed\n%s\nwant\n%s", out, want)
	}

	// Deploying: no group yet.
	shared.mu.Lock()
	shared.took, shared.group, shared.timings = 0, "", nil
	shared.mu.Unlock()
	report = deadlineReport(now, now.Add(3*time.Minute))
	if !strings.Contains(report, "--- FAIL: TestOpenStackE2E (deadline)") || !strings.Contains(report, "still running: the shared cloud's deployment") || !strings.Contains(report, "end-to-end groups done: none") {
		t.Errorf("the report during the deployment:\n%s", report)
	}

	// Neither: a test of its own was running.
	shared.mu.Lock()
	shared.tried = false
	shared.mu.Unlock()
	report = deadlineReport(now, now.Add(3*time.Minute))
	if !strings.HasPrefix(report, "--- FAIL: OSD_TEST_DEADLINE (deadline)\n") || strings.Contains(report, "deployment") {
		t.Errorf("the report with no end-to-end group running:\n%s", report)
	}
}
