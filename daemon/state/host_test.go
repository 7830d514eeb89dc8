package state

import (
	"context"
	"reflect"
	"testing"

	bimages "github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/daemon/store"
	"github.com/osdcloud/osd/netsetup"
)

func TestNetSavedKeepsEachPartInTheHostRecord(t *testing.T) {
	ctx := context.Background()
	db, err := store.OpenMemory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ext, tun := NetSaved(db, NetExternal), NetSaved(db, NetTunnel)
	if s, err := ext.Load(); err != nil || !s.Empty() {
		t.Fatalf("Load() before any Save = %+v, %v, want empty", s, err)
	}
	fwd := netsetup.Saved{IPForwardOriginal: "0"}
	moved := netsetup.Saved{Moved: &netsetup.MovedConfig{Interface: "eth0", Bridge: netsetup.TunnelBridge,
		Addrs: []netsetup.SavedAddr{{CIDR: "10.0.0.2/24", Label: "eth0"}}}}
	if err := ext.Save(fwd); err != nil {
		t.Fatal(err)
	}
	if err := tun.Save(moved); err != nil {
		t.Fatal(err)
	}
	if s, err := ext.Load(); err != nil || !reflect.DeepEqual(s, fwd) {
		t.Errorf("external Load() = %+v, %v, want %+v", s, err, fwd)
	}
	if s, err := tun.Load(); err != nil || !reflect.DeepEqual(s, moved) {
		t.Errorf("tunnel Load() = %+v, %v, want %+v", s, err, moved)
	}
	if err := ext.Save(netsetup.Saved{}); err != nil {
		t.Fatal(err)
	}
	h, _ := db.Host(ctx)
	if h.NetExternal != "" || h.NetTunnel == "" {
		t.Errorf("record after saving an empty external state = %q / %q, want it forgotten and the tunnel's kept", h.NetExternal, h.NetTunnel)
	}
}

func TestHostAccessors(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		h                    store.Host
		initialized, k8sOnly bool
	}{
		{store.Host{}, false, false},
		{store.Host{Initialized: true, Goal: GoalOpenStack}, true, false},
		{store.Host{Initialized: true, Goal: GoalKubernetes}, true, true},
	} {
		db, err := store.OpenMemory(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st := &State{DB: db}
		if err := st.UpdateHost(ctx, func(h *store.Host) error { *h = tt.h; return nil }); err != nil {
			t.Fatal(err)
		}
		if st.Initialized(ctx) != tt.initialized || st.KubernetesOnly(ctx) != tt.k8sOnly {
			t.Errorf("%+v: Initialized, KubernetesOnly = %v, %v, want %v, %v", tt.h, st.Initialized(ctx), st.KubernetesOnly(ctx), tt.initialized, tt.k8sOnly)
		}
		db.Close()
	}
	n := netsetup.ExternalNetwork{Bridge: "br-ex", CIDR: "172.24.4.0/24", GatewayIP: "172.24.4.1", Interface: "eth1"}
	if got := FromNetwork(*Network(n)); got != n {
		t.Errorf("FromNetwork(Network(%+v)) = %+v", n, got)
	}
}

func TestReleaseOf(t *testing.T) {
	for _, c := range []struct {
		name string
		h    store.Host
		want string
		err  bool
	}{
		{"nothing asked: the default", store.Host{}, bimages.DefaultReleaseName, false},
		{"recorded", store.Host{Initialized: true, Release: "epoxy"}, "epoxy", false},
		{"recorded by series", store.Host{Initialized: true, Release: "2025.1"}, "epoxy", false},
		{"initialized before releases were recorded", store.Host{Initialized: true}, "zed", false},
		{"joined before releases were recorded", store.Host{Join: &store.Join{State: "member"}}, "zed", false},
		{"unknown", store.Host{Initialized: true, Release: "victoria"}, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ReleaseOf(c.h)
			if (err != nil) != c.err || got.Name != c.want {
				t.Errorf("ReleaseOf(%+v) = %q, %v, want %q (error %v)", c.h, got.Name, err, c.want, c.err)
			}
		})
	}
}
