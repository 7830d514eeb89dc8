package openstack

import (
	"math"
	"time"

	"github.com/osdcloud/osd/bootstrap/images/guest"
	"github.com/osdcloud/osd/daemon/api"
)

// Nova's events of a create action: the conductor's scheduling (recorded by newer
// releases than Zed) and the compute host's build (the port's binding, the VIF plugged
// and its event, the domain defined and started).
const (
	eventSchedule = "conductor_schedule_and_build_instances"
	eventBuild    = "compute__do_build_and_run_instance"
)

// ProfileInput is what a launch observed: when it asked for the server, saw it ACTIVE and
// got the first ping answer, Nova's events of the create, and the guest's console.
type ProfileInput struct {
	Created, Active, Pinged time.Time
	Events                  []ActionEvent
	Console                 guest.Console
}

// LaunchProfile says where a launch's time went (pure): create to ACTIVE and within it
// Nova's scheduling and build on the host (Nova records those to the second), then the
// guest's own boot (its kernel to /init, /init to its DHCP lease, from its uptime), and
// ACTIVE to the first ping. What was not observed is left out.
func LaunchProfile(in ProfileInput) []api.LaunchPhase {
	var out []api.LaunchPhase
	add := func(name string, d float64) {
		out = append(out, api.LaunchPhase{Name: name, Seconds: math.Round(d*10) / 10})
	}
	if !in.Active.IsZero() && !in.Created.IsZero() {
		add("create to ACTIVE", in.Active.Sub(in.Created).Seconds())
	}
	for _, e := range []struct{ event, name string }{
		{eventSchedule, "  Nova: scheduling (to the second)"},
		{eventBuild, "  Nova: build on the host (to the second)"},
	} {
		if d, ok := eventSeconds(in.Events, e.event); ok {
			add(e.name, d)
		}
	}
	if c := in.Console; c.InitUptime > 0 {
		add("guest: kernel to /init", c.InitUptime)
		if c.LeaseUptime >= c.InitUptime {
			add("guest: /init to its DHCP lease", c.LeaseUptime-c.InitUptime)
		}
	}
	if !in.Pinged.IsZero() && !in.Active.IsZero() {
		add("ACTIVE to the first ping", in.Pinged.Sub(in.Active).Seconds())
	}
	return out
}

// eventSeconds is how long the named event took, when Nova recorded its end.
func eventSeconds(events []ActionEvent, name string) (float64, bool) {
	for _, e := range events {
		if e.Event != name {
			continue
		}
		start, err1 := parseNovaTime(e.StartTime)
		end, err2 := parseNovaTime(e.FinishTime)
		if err1 != nil || err2 != nil || end.Before(start) {
			return 0, false
		}
		return end.Sub(start).Seconds(), true
	}
	return 0, false
}

// parseNovaTime reads Nova's timestamps (ISO 8601 without a zone, UTC, with or without
// fractional seconds).
func parseNovaTime(s string) (time.Time, error) {
	for _, layout := range []string{"2006-01-02T15:04:05.999999", time.RFC3339Nano} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Parse("2006-01-02T15:04:05", s)
}
