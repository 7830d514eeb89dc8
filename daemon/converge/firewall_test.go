package converge

import (
	"slices"
	"testing"

	"github.com/osdcloud/osd/bootstrap/deploy"
)

func TestPublicPorts(t *testing.T) {
	got := PublicPorts(deploy.DefaultCatalog())
	want := []uint16{30000, 30004, 30080, 30292, 30500, 30680, 30696, 30774, 30776, 30778}
	if !slices.Equal(got, want) {
		t.Errorf("PublicPorts(DefaultCatalog()) = %v, want %v", got, want)
	}
}

func TestHostAddresses(t *testing.T) {
	got := HostAddresses([]string{"192.168.1.10:8443", "192.168.1.11", "[2001:db8::1]:8443", "127.0.0.1:8443",
		"node-a:8443", "0.0.0.0", "fe80::1%eth0", "::ffff:10.0.0.1"})
	want := []string{"192.168.1.10", "192.168.1.11", "2001:db8::1", "10.0.0.1"}
	if !slices.Equal(got, want) {
		t.Errorf("HostAddresses = %v, want %v", got, want)
	}
}
