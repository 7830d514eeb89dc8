package hostplan

import (
	"testing"

	"github.com/osdcloud/osd/netsetup"
)

func TestExternalDetail(t *testing.T) {
	nat := netsetup.ExternalNetwork{Bridge: "br-ex", CIDR: "172.24.4.0/24", GatewayIP: "172.24.4.1"}
	nic := netsetup.ExternalNetwork{Bridge: "br-ex", Interface: "eth1"}
	for _, tc := range []struct {
		name    string
		ext     netsetup.ExternalNetwork
		applied []netsetup.Op
		want    string
	}{
		{"converged", nat, nil, "br-ex 172.24.4.0/24 via 172.24.4.1 (NAT)"},
		{"interface converged", nic, nil, "br-ex with eth1"},
		{"link was down", nat, []netsetup.Op{{Kind: netsetup.OpLinkUp, Link: "br-ex"}},
			"br-ex 172.24.4.0/24 via 172.24.4.1 (NAT): set link br-ex up"},
		{"address and forwarding lost", nat, []netsetup.Op{
			{Kind: netsetup.OpAddAddr, Link: "br-ex", Addr: "172.24.4.1/24"},
			{Kind: netsetup.OpEnableForwarding},
		}, "br-ex 172.24.4.0/24 via 172.24.4.1 (NAT): add address 172.24.4.1/24 to br-ex; " + (netsetup.Op{Kind: netsetup.OpEnableForwarding}).String()},
	} {
		if got := externalDetail(tc.ext, tc.applied); got != tc.want {
			t.Errorf("%s: externalDetail = %q, want %q", tc.name, got, tc.want)
		}
	}
}
