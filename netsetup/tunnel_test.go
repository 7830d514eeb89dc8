package netsetup

import (
	"strings"
	"testing"
)

func TestPlanTunnel(t *testing.T) {
	for _, c := range []struct {
		name                       string
		datapath, wanted, ip, link string
		want                       TunnelPlan
		wantErr                    string
	}{
		{name: "kernel datapath, nothing asked", datapath: DatapathSystem, ip: "10.0.0.2", link: "eth0",
			want: TunnelPlan{Address: "10.0.0.2"}},
		{name: "kernel datapath, auto", datapath: DatapathSystem, wanted: TunnelAuto, ip: "10.0.0.2", link: "eth0",
			want: TunnelPlan{Address: "10.0.0.2"}},
		{name: "kernel datapath, an interface: its address, no bridge", datapath: DatapathSystem, wanted: "eth1", ip: "10.0.0.2", link: "eth0",
			want: TunnelPlan{}},
		{name: "userspace, nothing asked: no bridge", datapath: DatapathNetdev, ip: "10.0.0.2", link: "eth0",
			want: TunnelPlan{Address: "10.0.0.2"}},
		{name: "userspace, none", datapath: DatapathNetdev, wanted: TunnelNone, ip: "10.0.0.2", link: "eth0",
			want: TunnelPlan{Address: "10.0.0.2"}},
		{name: "userspace, auto: the node address's interface", datapath: DatapathNetdev, wanted: TunnelAuto, ip: "10.0.0.2", link: "eth0",
			want: TunnelPlan{Interface: "eth0"}},
		{name: "userspace, auto, moved already", datapath: DatapathNetdev, wanted: TunnelAuto, ip: "10.0.0.2", link: "",
			want: TunnelPlan{Address: "10.0.0.2"}},
		{name: "userspace, auto, no address", datapath: DatapathNetdev, wanted: TunnelAuto, wantErr: "--node-ip"},
		{name: "userspace, an interface", datapath: DatapathNetdev, wanted: "veth1", ip: "10.0.0.2", link: "eth0",
			want: TunnelPlan{Interface: "veth1"}},
		{name: "userspace, the bridge itself", datapath: DatapathNetdev, wanted: TunnelBridge, wantErr: "bridge itself"},
	} {
		got, err := PlanTunnel(c.datapath, c.wanted, c.ip, c.link)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("PlanTunnel(%s) = %+v, %v, want error %q", c.name, got, err, c.wantErr)
			}
			continue
		}
		if err != nil || got.Interface != c.want.Interface || got.Address != c.want.Address || got.Note == "" {
			t.Errorf("PlanTunnel(%s) = %+v, %v, want %+v with a note", c.name, got, err, c.want)
		}
	}
}
