package openstack

import (
	"strings"
	"testing"

	"github.com/osdcloud/osd/bootstrap/images/guest"
)

func TestDiagnose(t *testing.T) {
	healthy := Facts{ServerStatus: "ACTIVE", PortStatus: "ACTIVE", VIFType: "ovs", PortHost: "vm", ConsoleRead: true,
		Console: guest.Console{Started: true, Address: "10.20.0.5/24", Gateway: "10.20.0.1"}, RouterFound: true, RouterName: "osd-router", RouterGateway: true}
	for _, tc := range []struct {
		name   string
		mutate func(*Facts)
		want   []string // substrings of the findings, in order
	}{
		{"nothing wrong", func(*Facts) {}, []string{"nothing observable is wrong (the guest has 10.20.0.5/24)"}},
		{"server error", func(f *Facts) { f.ServerStatus, f.Fault = "ERROR", "No valid host was found. " }, []string{"server is ERROR: No valid host was found."}},
		{"binding failed", func(f *Facts) { f.VIFType, f.PortStatus = "binding_failed", "DOWN" }, []string{"port binding failed (binding:vif_type=binding_failed on host vm)"}},
		{"port down", func(f *Facts) { f.PortStatus = "DOWN" }, []string{"port is DOWN"}},
		{"no lease", func(f *Facts) { f.Console = guest.Console{Started: true, LeaseFail: true} }, []string{"no DHCP lease in the console log"}},
		{"never booted", func(f *Facts) { f.Console = guest.Console{} }, []string{"never printed its marker"}},
		{"no nic", func(f *Facts) { f.Console = guest.Console{Started: true, NoNIC: true} }, []string{"the guest has no eth0"}},
		{"console unreadable", func(f *Facts) { f.ConsoleRead = false }, []string{"console log could not be read"}},
		{"router without gateway", func(f *Facts) { f.RouterGateway = false }, []string{"router osd-router has no gateway on the external network"}},
		{"no router", func(f *Facts) { f.RouterFound = false }, []string{"no router has an interface on the server's subnet"}},
		{"no host route", func(f *Facts) {
			f.HostRouteError = "the host routes it via eth0 through its default gateway, not br-ex"
		},
			[]string{"no route from the host to the floating IP: the host routes it via eth0"}},
		{"several", func(f *Facts) {
			f.VIFType = "binding_failed"
			f.Console = guest.Console{Started: true, LeaseFail: true}
			f.RouterGateway = false
		},
			[]string{"port binding failed", "no DHCP lease", "router osd-router has no gateway"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := healthy
			tc.mutate(&f)
			got := Diagnose(f)
			if len(got) != len(tc.want) {
				t.Fatalf("Diagnose(%s) = %q, want %d findings like %q", tc.name, got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("Diagnose(%s)[%d] = %q, want it to contain %q", tc.name, i, got[i], w)
				}
			}
		})
	}
}

func TestRouteProblem(t *testing.T) {
	for _, tc := range []struct{ out, err string }{
		{"172.24.4.150 dev br-ex src 172.24.4.1 uid 0 \n    cache \n", ""},
		{"172.24.4.150 via 192.0.2.1 dev eth0 src 192.0.2.2 uid 0 \n    cache \n", "the host routes it via eth0 through its default gateway, not br-ex"},
		{"192.168.1.40 dev eth1 src 192.168.1.2 uid 0\n", ""},
		{"unreachable 172.24.4.150 uid 0\n", "unreachable 172.24.4.150"},
	} {
		t.Run(tc.out, func(t *testing.T) {
			err := RouteProblem(tc.out)
			if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("RouteProblem(%q) = %v, want %q", tc.out, err, tc.err)
			}
		})
	}
}

func TestLaunchRequestWithDefaults(t *testing.T) {
	got := LaunchDefaults(LaunchRequest{})
	if !strings.HasPrefix(got.Name, "osd-test-") || len(got.Name) != len("osd-test-")+6 || got.Flavor != "m1.tiny" || got.Image != "osd-test" || got.Network != "osd-net" || got.Key != "osd-key" {
		t.Errorf("LaunchDefaults(LaunchRequest{}) = %+v, want osd-test-<6 hex>, m1.tiny, osd-test, osd-net, osd-key", got)
	}
	if other := LaunchDefaults(LaunchRequest{}); other.Name == got.Name {
		t.Errorf("LaunchDefaults twice gave the same name %s", got.Name)
	}
	kept := LaunchRequest{Name: "web", Flavor: "m1.small", Image: "cirros", Network: "n", Key: "mine", NoWait: true}
	if LaunchDefaults(kept) != kept {
		t.Errorf("LaunchDefaults(%+v) = %+v, want it unchanged", kept, LaunchDefaults(kept))
	}
}

func TestMetadataFinding(t *testing.T) {
	const id = "6f0e2c1a-1b2c-4d5e-8f90-0a1b2c3d4e5f"
	for _, tc := range []struct {
		name    string
		console guest.Console
		want    string
		ok      bool
	}{
		{"own uuid", guest.Console{Started: true, Address: "10.20.0.5/24", MetadataUUID: id}, "the guest read its own uuid", true},
		{"another server's uuid", guest.Console{Started: true, MetadataUUID: "00000000-0000-0000-0000-000000000001"}, "gave the guest uuid 00000000-0000-0000-0000-000000000001, not this server's", true},
		{"no answer", guest.Console{Started: true, Address: "10.20.0.5/24", MetadataFail: true}, "no answer from http://169.254.169.254", true},
		{"not reported yet", guest.Console{Started: true, Address: "10.20.0.5/24"}, "", false},
	} {
		got, ok := MetadataFinding(tc.console, id)
		if ok != tc.ok || !strings.Contains(got, tc.want) || (tc.want == "") != (got == "") {
			t.Errorf("MetadataFinding(%s) = %q, %v, want %q, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
