package test

import (
	"flag"
	"os"
	"testing"
	"time"
)

// TestMain runs the package's tests, then tears the shared cloud down (osd reset) whatever
// happened; a signal, or the -timeout coming near, tears it down as well (see shared_test.go).
func TestMain(m *testing.M) {
	flag.Parse()
	var timeout time.Duration
	if f := flag.Lookup("test.timeout"); f != nil {
		if g, ok := f.Value.(flag.Getter); ok {
			timeout, _ = g.Get().(time.Duration)
		}
	}
	stop := teardownBefore(timeout)
	code := m.Run()
	stop()
	teardownShared("the tests are done", code != 0)
	os.Exit(code)
}
