package test

import (
	"flag"
	"fmt"
	"os"
	"testing"
	"time"
)

// TestMain runs the package's tests, then tears the shared cloud down (osd reset) whatever
// happened; a signal, or the -timeout or OSD_TEST_DEADLINE coming near, tears it down as
// well (see shared_test.go).
func TestMain(m *testing.M) {
	flag.Parse()
	var timeout time.Duration
	if f := flag.Lookup("test.timeout"); f != nil {
		if g, ok := f.Value.(flag.Getter); ok {
			timeout, _ = g.Get().(time.Duration)
		}
	}
	deadline, err := testDeadline(os.Getenv("OSD_TEST_DEADLINE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	stop := teardownBefore(time.Now(), timeout, deadline)
	code := m.Run()
	stop()
	teardownShared("the tests are done", code != 0)
	os.Exit(code)
}
