package hostplan

import (
	"testing"
	"time"

	"github.com/osdcloud/osd/bootstrap"
)

func TestStepLine(t *testing.T) {
	for _, c := range []struct {
		e    bootstrap.Event
		want string
	}{
		{bootstrap.Event{Step: "openvswitch"}, "openvswitch ..."},
		{bootstrap.Event{Step: "openvswitch", Done: true, Took: 1234 * time.Millisecond}, "openvswitch: unchanged (1.2s)"},
		{bootstrap.Event{Step: "libvirt", Done: true, Changed: true, Detail: "libvirt 9.0", Took: time.Second}, "libvirt: changed: libvirt 9.0 (1s)"},
		{bootstrap.Event{Step: "images", Done: true, Error: "no space", Took: 50 * time.Millisecond}, "images: FAILED: no space (100ms)"},
		{bootstrap.Event{Step: "libvirt", Attempt: 2, Done: true, Error: "pidfile held", Took: time.Second, RetryIn: 10 * time.Second},
			"libvirt: attempt 2 FAILED: pidfile held (1s); trying again in 10s"},
	} {
		if got := StepLine(c.e); got != c.want {
			t.Errorf("StepLine(%+v) = %q, want %q", c.e, got, c.want)
		}
	}
}
