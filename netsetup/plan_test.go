package netsetup

import (
	"reflect"
	"strings"
	"testing"
)

func kinds(ops []Op) []OpKind {
	out := []OpKind{}
	for _, o := range ops {
		out = append(out, o.Kind)
	}
	return out
}

func TestPlan(t *testing.T) {
	def := DefaultExternalNetwork()
	converged := State{
		Bridges:   map[string]BridgeState{"br-ex": {DatapathType: "netdev", Ports: map[string]string{"br-ex": "internal"}}},
		Links:     map[string]LinkState{"br-ex": {Exists: true, Up: true, Addrs: []string{"172.24.4.1/24"}}},
		IPForward: "1",
		NATRules:  NATRuleIDs(def),
	}
	with := func(f func(*State)) State {
		s := converged
		s.Bridges = map[string]BridgeState{}
		for k, v := range converged.Bridges {
			s.Bridges[k] = v
		}
		s.Links = map[string]LinkState{}
		for k, v := range converged.Links {
			s.Links[k] = v
		}
		f(&s)
		return s
	}
	nicRoutes := []Route{{Dst: "", Gw: "192.0.2.2"}, {Dst: "198.51.100.0/24", Gw: "192.0.2.2", Priority: 50}}
	ifaceNet := ExternalNetwork{Bridge: "br-ex", Interface: "eth1"}
	tests := []struct {
		name  string
		state State
		spec  Spec
		want  []OpKind
		check func(t *testing.T, ops []Op)
	}{
		{
			name:  "fresh host",
			state: State{IPForward: "0"},
			spec:  Spec{Datapath: "netdev", External: def},
			want:  []OpKind{OpEnsureBridge, OpLinkUp, OpAddAddr, OpEnableForwarding, OpEnsureNAT},
			check: func(t *testing.T, ops []Op) {
				if ops[0].Datapath != "netdev" || ops[0].Bridge != "br-ex" {
					t.Errorf("ops[0] = %+v, want br-ex netdev", ops[0])
				}
				if ops[2].Addr != "172.24.4.1/24" || ops[2].Link != "br-ex" {
					t.Errorf("ops[2] = %+v, want 172.24.4.1/24 on br-ex", ops[2])
				}
				if ops[4].CIDR != "172.24.4.0/24" {
					t.Errorf("ops[4].CIDR = %s, want 172.24.4.0/24", ops[4].CIDR)
				}
			},
		},
		{name: "converged", state: converged, spec: Spec{Datapath: "netdev", External: def}, want: []OpKind{}},
		{
			name:  "wrong datapath",
			state: converged,
			spec:  Spec{Datapath: "system", External: def},
			want:  []OpKind{OpEnsureBridge},
		},
		{
			name:  "link down, address lost (vswitchd restarted)",
			state: with(func(s *State) { s.Links["br-ex"] = LinkState{Exists: true} }),
			spec:  Spec{Datapath: "netdev", External: def},
			want:  []OpKind{OpLinkUp, OpAddAddr},
		},
		{
			name:  "other address on br-ex is left alone",
			state: with(func(s *State) { s.Links["br-ex"] = LinkState{Exists: true, Up: true, Addrs: []string{"10.0.0.1/8"}} }),
			spec:  Spec{Datapath: "netdev", External: def},
			want:  []OpKind{OpAddAddr},
		},
		{
			name:  "forwarding off",
			state: with(func(s *State) { s.IPForward = "0" }),
			spec:  Spec{Datapath: "netdev", External: def},
			want:  []OpKind{OpEnableForwarding},
		},
		{
			name:  "nat table missing",
			state: with(func(s *State) { s.NATRules = nil }),
			spec:  Spec{Datapath: "netdev", External: def},
			want:  []OpKind{OpEnsureNAT},
		},
		{
			name:  "nat table empty",
			state: with(func(s *State) { s.NATRules = []string{} }),
			spec:  Spec{Datapath: "netdev", External: def},
			want:  []OpKind{OpEnsureNAT},
		},
		{
			name:  "nat rules in another order are fine",
			state: with(func(s *State) { s.NATRules = []string{s.NATRules[2], s.NATRules[0], s.NATRules[1]} }),
			spec:  Spec{Datapath: "netdev", External: def},
			want:  []OpKind{},
		},
		{
			name:  "nat for another CIDR",
			state: converged,
			spec:  Spec{Datapath: "netdev", External: ExternalNetwork{Bridge: "br-ex", CIDR: "172.24.0.0/16", GatewayIP: "172.24.4.1"}},
			want:  []OpKind{OpAddAddr, OpEnsureNAT},
		},
		{
			name: "interface mode, fresh",
			state: State{Links: map[string]LinkState{"eth1": {Exists: true, Up: true,
				Addrs: []string{"192.0.2.1/24"}, Routes: nicRoutes}}},
			spec: Spec{Datapath: "netdev", External: ifaceNet},
			want: []OpKind{OpEnsureBridge, OpAddPort, OpLinkUp, OpMoveIPConfig, OpProbe},
			check: func(t *testing.T, ops []Op) {
				mv := ops[3]
				if !reflect.DeepEqual(mv.Addrs, []string{"192.0.2.1/24"}) || !reflect.DeepEqual(mv.Routes, nicRoutes) {
					t.Errorf("move op = %+v, want the NIC's address and routes", mv)
				}
				if ops[4].Addr != "192.0.2.2" {
					t.Errorf("probe gateway = %q, want 192.0.2.2", ops[4].Addr)
				}
				if !strings.Contains(mv.String(), "default via 192.0.2.2") {
					t.Errorf("move description = %q, want the routes named", mv.String())
				}
			},
		},
		{
			name: "interface mode, converged",
			state: State{
				Bridges: map[string]BridgeState{"br-ex": {DatapathType: "netdev", Ports: map[string]string{"br-ex": "internal", "eth1": ""}}},
				Links: map[string]LinkState{"eth1": {Exists: true, Up: true},
					"br-ex": {Exists: true, Up: true, Addrs: []string{"192.0.2.1/24"}, Routes: nicRoutes}},
			},
			spec: Spec{Datapath: "netdev", External: ifaceNet},
			want: []OpKind{},
		},
		{
			name: "interface mode, port present but addresses still on the NIC",
			state: State{
				Bridges: map[string]BridgeState{"br-ex": {DatapathType: "netdev", Ports: map[string]string{"eth1": ""}}},
				Links: map[string]LinkState{"eth1": {Exists: true, Up: true, Addrs: []string{"192.0.2.1/24"}},
					"br-ex": {Exists: true, Up: true, Routes: nicRoutes[:1]}},
			},
			spec: Spec{Datapath: "netdev", External: ifaceNet},
			want: []OpKind{OpMoveIPConfig, OpProbe},
			check: func(t *testing.T, ops []Op) {
				if ops[1].Addr != "192.0.2.2" {
					t.Errorf("probe gateway = %q, want 192.0.2.2 (from br-ex)", ops[1].Addr)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ops := Plan(tc.state, tc.spec)
			if got := kinds(ops); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Plan() = %v, want %v", got, tc.want)
			}
			for _, o := range ops {
				if o.String() == "" || o.String() == string(o.Kind) {
					t.Errorf("Op(%s).String() = %q, want a description", o.Kind, o.String())
				}
			}
			if tc.check != nil {
				tc.check(t, ops)
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	tests := []struct {
		in      ExternalNetwork
		want    ExternalNetwork
		wantErr bool
	}{
		{in: ExternalNetwork{}, want: DefaultExternalNetwork()},
		{in: ExternalNetwork{CIDR: "10.5.0.7/16"}, want: ExternalNetwork{Bridge: "br-ex", CIDR: "10.5.0.0/16", GatewayIP: "10.5.0.1"}},
		{in: ExternalNetwork{Bridge: "br-x", CIDR: "10.5.0.0/16", GatewayIP: "10.5.3.3"}, want: ExternalNetwork{Bridge: "br-x", CIDR: "10.5.0.0/16", GatewayIP: "10.5.3.3"}},
		{in: ExternalNetwork{Interface: "eth1"}, want: ExternalNetwork{Bridge: "br-ex", Interface: "eth1"}},
		{in: ExternalNetwork{CIDR: "10.5.0.0/16", GatewayIP: "10.6.0.1"}, wantErr: true},
		{in: ExternalNetwork{CIDR: "fd00::/64"}, wantErr: true},
		{in: ExternalNetwork{CIDR: "nonsense"}, wantErr: true},
		{in: ExternalNetwork{Interface: "br-ex"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.in.CIDR+tc.in.Interface, func(t *testing.T) {
			got, err := tc.in.Normalize()
			if (err != nil) != tc.wantErr {
				t.Fatalf("Normalize(%+v) error = %v, want error %v", tc.in, err, tc.wantErr)
			}
			if !tc.wantErr && got != tc.want {
				t.Fatalf("Normalize(%+v) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
	if got := DefaultExternalNetwork().GatewayCIDR(); got != "172.24.4.1/24" {
		t.Fatalf("GatewayCIDR() = %s, want 172.24.4.1/24", got)
	}
}

func TestChooseDatapath(t *testing.T) {
	tests := []struct {
		loaded, installed bool
		want              string
	}{
		{false, false, DatapathNetdev},
		{true, false, DatapathSystem},
		{false, true, DatapathSystem},
		{true, true, DatapathSystem},
	}
	for _, tc := range tests {
		if got := ChooseDatapath(tc.loaded, tc.installed); got != tc.want {
			t.Errorf("ChooseDatapath(%v, %v) = %s, want %s", tc.loaded, tc.installed, got, tc.want)
		}
	}
}

func TestReverter(t *testing.T) {
	var got []int
	r := NewReverter()
	r.Add(func() { got = append(got, 1) }, func() { got = append(got, 2) })
	r.Add(func() { got = append(got, 3) })
	r.Fail()
	if want := []int{3, 2, 1}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Fail() ran %v, want %v", got, want)
	}
	r.Fail()
	if len(got) != 3 {
		t.Fatalf("second Fail() ran again: %v", got)
	}
	got = nil
	r.Add(func() { got = append(got, 4) })
	r.Success()
	r.Fail()
	if len(got) != 0 {
		t.Fatalf("Fail() after Success() ran %v, want nothing", got)
	}
}

func TestMergeMoved(t *testing.T) {
	old := &MovedConfig{Interface: "eth1", Addrs: []SavedAddr{{CIDR: "192.0.2.1/24", Label: "eth1"}},
		Routes: []Route{{Gw: "192.0.2.2"}}}
	cur := MovedConfig{Interface: "eth1", Addrs: []SavedAddr{{CIDR: "192.0.2.1/24"}, {CIDR: "192.0.2.9/24"}},
		Routes: []Route{{Gw: "192.0.2.2"}, {Dst: "10.0.0.0/8", Gw: "192.0.2.3"}}}
	got := mergeMoved(old, cur)
	if len(got.Addrs) != 2 || got.Addrs[0].Label != "eth1" || len(got.Routes) != 2 {
		t.Fatalf("mergeMoved() = %+v, want the old originals plus the new entries", got)
	}
	if got := mergeMoved(nil, cur); !reflect.DeepEqual(*got, cur) {
		t.Fatalf("mergeMoved(nil) = %+v, want %+v", got, cur)
	}
}

func TestICMPChecksum(t *testing.T) {
	b := echoRequest(0x1234, 1)
	if icmpChecksum(b) != 0 {
		t.Fatalf("icmpChecksum(echoRequest) = %#x, want 0 (a valid checksum sums to zero)", icmpChecksum(b))
	}
}
