package openstack

import (
	"reflect"
	"testing"
	"time"

	"github.com/osdcloud/osd/bootstrap/images/guest"
	"github.com/osdcloud/osd/daemon/api"
)

func TestLaunchProfile(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	events := []ActionEvent{
		{Event: eventSchedule, StartTime: "2026-12-02T05:00:00.000000", FinishTime: "2026-12-02T05:00:01.000000"},
		{Event: eventBuild, StartTime: "2026-12-02T05:00:01", FinishTime: "2026-12-02T05:00:04"},
	}
	con := guest.Console{Started: true, InitUptime: 2.01, LeaseUptime: 4.56}
	for _, tt := range []struct {
		name string
		in   ProfileInput
		want []api.LaunchPhase
	}{
		{"everything", ProfileInput{Created: t0, Active: t0.Add(4200 * time.Millisecond), Pinged: t0.Add(9700 * time.Millisecond), Events: events, Console: con},
			[]api.LaunchPhase{{Name: "create to ACTIVE", Seconds: 4.2}, {Name: "  Nova: scheduling (to the second)", Seconds: 1}, {Name: "  Nova: build on the host (to the second)", Seconds: 3},
				{Name: "guest: kernel to /init", Seconds: 2}, {Name: "guest: /init to its DHCP lease", Seconds: 2.6}, {Name: "ACTIVE to the first ping", Seconds: 5.5}}},
		{"no events, no uptimes (an older guest image)", ProfileInput{Created: t0, Active: t0.Add(3 * time.Second), Pinged: t0.Add(7 * time.Second), Console: guest.Console{Started: true}},
			[]api.LaunchPhase{{Name: "create to ACTIVE", Seconds: 3}, {Name: "ACTIVE to the first ping", Seconds: 4}}},
		{"an unfinished or unreadable event", ProfileInput{Created: t0, Active: t0.Add(time.Second),
			Events: []ActionEvent{{Event: eventBuild, StartTime: "2026-12-02T05:00:01"}, {Event: eventSchedule, StartTime: "yesterday", FinishTime: "today"}}},
			[]api.LaunchPhase{{Name: "create to ACTIVE", Seconds: 1}}},
		{"nothing observed", ProfileInput{}, nil},
	} {
		if got := LaunchProfile(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("LaunchProfile(%s) = %v, want %v", tt.name, got, tt.want)
		}
	}
}
