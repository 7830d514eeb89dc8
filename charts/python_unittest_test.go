package charts

import (
	"os/exec"
	"regexp"
	"strconv"
	"testing"
)

// TestPythonPrograms runs the unit tests of the charts' Python programs (files/*.py of the
// charts, imported by testdata/python/test_*.py with the standard library only).
func TestPythonPrograms(t *testing.T) {
	cmd := exec.Command("python3", "-m", "unittest", "discover", "-s", "testdata/python", "-t", "testdata/python")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest discover: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Ran (\d+) tests?`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("python3 -m unittest discover ran no tests:\n%s", out)
	}
	if n, _ := strconv.Atoi(string(m[1])); n < 10 {
		t.Errorf("python3 -m unittest discover ran %d tests, want the programs' tests:\n%s", n, out)
	}
	t.Logf("%s", out)
}
