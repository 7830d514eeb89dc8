package charts

import (
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/osdcloud/osd/daemon/deploy"
	"github.com/osdcloud/osd/daemon/deploy/helmclient"
)

// mallocTrimEnd ends osd-lib.mallocTrim's code.
const mallocTrimEnd = "# end of osd-lib.mallocTrim\n"

var mallocTrimCall = regexp.MustCompile(`(?m)^_osd_malloc_trim\((\d+)\)$`)

// splitMallocTrim cuts osd-lib.mallocTrim's code off the front of a python3 -c program: the
// code, its interval in seconds, and the program after it ("", 0 and program without it).
func splitMallocTrim(program string) (trim string, seconds int, rest string) {
	i := strings.Index(program, mallocTrimEnd)
	if !strings.HasPrefix(program, "def _osd_malloc_trim(") || i < 0 {
		return "", 0, program
	}
	trim, rest = program[:i+len(mallocTrimEnd)], program[i+len(mallocTrimEnd):]
	if m := mallocTrimCall.FindStringSubmatch(trim); m != nil {
		seconds, _ = strconv.Atoi(m[1])
	}
	return trim, seconds, rest
}

// withoutMallocTrim is a container's command with its python3 -c program cut of
// osd-lib.mallocTrim's code, which it must have with the given interval.
func withoutMallocTrim(t *testing.T, name string, command []string, seconds int) []string {
	t.Helper()
	if len(command) < 3 || command[0] != "/usr/bin/python3" || command[1] != "-c" {
		t.Errorf("%s command %.80q: want /usr/bin/python3 -c PROGRAM", name, command)
		return command
	}
	_, got, rest := splitMallocTrim(command[2])
	if got != seconds {
		t.Errorf("%s: the heap is trimmed every %d s (0: never), want %d", name, got, seconds)
	}
	return append([]string{command[0], command[1], rest}, command[3:]...)
}

// TestMallocTrim: glance-api's program starts with osd-lib.mallocTrim for the chart's
// interval (none for 0, a render error for a negative one), and that code run by Python
// gives a heap's freed pages back to the kernel, which it keeps otherwise.
func TestMallocTrim(t *testing.T) {
	glanceAPI := func(seconds int) []string {
		objs, _, _ := renderAPI(t, "glance", overrides("glance", map[string]any{"mallocTrimSeconds": seconds}))
		return containerByName(objs.deployment.Spec.Template.Spec.Containers, "glance-api").Command
	}
	const glanceMain = "import sys\nfrom glance.cmd.api import main\nsys.exit(main())\n"
	if got := strings.Join(withoutMallocTrim(t, "glance-api", glanceAPI(30), 30), " "); got != "/usr/bin/python3 -c "+glanceMain+" --config-file /etc/glance/glance-api.conf" {
		t.Errorf("glance-api command without the trim = %q", got)
	}
	if cmd := glanceAPI(0); cmd[2] != glanceMain {
		t.Errorf("mallocTrimSeconds 0: glance-api's program = %q, want glance's main alone", cmd[2])
	}
	svc, _ := deploy.DefaultCatalog().Service("glance")
	ch, _, err := helmclient.LoadChart(FS, "glance")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []any{-1, 1.5, "often", true} {
		vals, err := deploy.Render(overrides("glance", map[string]any{"mallocTrimSeconds": bad}), svc, ch.Values)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := helmclient.Template(context.Background(), ch, svc.Namespace, svc.Name, deploy.HelmValues(vals, ch.Values)); err == nil || !strings.Contains(err.Error(), "mallocTrimSeconds") || !strings.Contains(err.Error(), "is not whole seconds") {
			t.Errorf("mallocTrimSeconds %v: render error = %v, want one naming it", bad, err)
		}
	}

	trim, _, _ := splitMallocTrim(glanceAPI(1)[2])
	// 200 MiB in 4 KiB blocks from glibc's heap, all freed but every 100th (the last one
	// kept, so that free cannot shrink the heap from its top); the resident size before
	// the frees, right after them and 3 s later. With the trim every second, its thread
	// may run between the frees and the second figure (a busy machine, 2026-11-29): what
	// it gave back is measured from the first.
	const program = `
import time
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
blocks = [bytes(4096) for _ in range(51200)]
kept = blocks[::100] + [blocks[-1]]
peak = rss()
del blocks
freed = rss()
time.sleep(3)
print(peak, freed, rss())
`
	measure := func(prog string) (peak, freed, later int) {
		out, err := exec.Command("python3", "-c", prog).CombinedOutput()
		if err != nil {
			t.Fatalf("python3: %v\n%s", err, out)
		}
		f := strings.Fields(string(out))
		if len(f) != 3 {
			t.Fatalf("python3 printed %q, want three sizes", out)
		}
		peak, _ = strconv.Atoi(f[0])
		freed, _ = strconv.Atoi(f[1])
		later, _ = strconv.Atoi(f[2])
		return peak, freed, later
	}
	peak, freed, later := measure(program)
	if peak < 150 || freed < 150 || later < freed-20 {
		t.Fatalf("without the trim: %d MiB resident before the frees, %d MiB after, %d MiB 3 s later; want the freed heap kept (over 150 MiB every time), else this test measures nothing", peak, freed, later)
	}
	peak, freed, later = measure(trim + program)
	if peak < 150 || later > peak-100 {
		t.Errorf("with osd-lib.mallocTrim every second: %d MiB resident before the frees, %d MiB after, %d MiB 3 s later; want over 100 MiB given back", peak, freed, later)
	}
	t.Logf("with the trim: %d MiB resident before the frees, %d MiB after, %d MiB 3 s later", peak, freed, later)
}
