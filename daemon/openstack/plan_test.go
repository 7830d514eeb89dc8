package openstack

import (
	"strings"
	"testing"
)

func TestExternalNetwork(t *testing.T) {
	for _, tc := range []struct{ cidr, gw, pool, err string }{
		{"172.24.4.0/24", "172.24.4.1", "172.24.4.100-172.24.4.199", ""},
		{"192.168.50.0/24", "192.168.50.1", "192.168.50.100-192.168.50.199", ""},
		{"10.9.0.0/16", "10.9.0.1", "10.9.0.100-10.9.0.199", ""},
		{"10.9.0.0/28", "10.9.0.1", "10.9.0.8-10.9.0.14", ""},
		{"172.24.4.0/24", "172.24.4.150", "172.24.4.151-172.24.4.199", ""},
		{"172.24.4.0/30", "172.24.4.1", "", "too small"},
		{"172.24.4.0/24", "10.0.0.1", "", "is not in"},
		{"fd00::/64", "fd00::1", "", "want an IPv4 CIDR"},
	} {
		t.Run(tc.cidr+" "+tc.gw, func(t *testing.T) {
			got, err := ExternalNetwork(tc.cidr, tc.gw)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("ExternalNetwork(%s, %s) error = %v, want %q", tc.cidr, tc.gw, err, tc.err)
				}
				return
			}
			if err != nil || len(got.Pools) != 1 || got.Pools[0].Start+"-"+got.Pools[0].End != tc.pool {
				t.Errorf("ExternalNetwork(%s, %s) = %+v, %v, want pool %s", tc.cidr, tc.gw, got.Pools, err, tc.pool)
			}
			if !got.External || got.DHCP || got.NetworkType != "flat" || got.PhysicalNetwork != "physnet1" || got.Gateway != tc.gw {
				t.Errorf("ExternalNetwork(%s, %s) = %+v, want flat physnet1, external, no DHCP", tc.cidr, tc.gw, got)
			}
		})
	}
}

func intp(i int) *int { return &i }

func ops(o []Op) string {
	var s []string
	for _, x := range o {
		s = append(s, x.String())
	}
	return strings.Join(s, "; ")
}

// converged is what a cloud looks like after day-one ran.
func converged() Observed {
	return Observed{
		Flavors: []Flavor{{ID: "1", Name: "m1.tiny", VCPUs: 1, RAM: 256, Disk: 1}, {ID: "2", Name: "m1.small", VCPUs: 1, RAM: 2048, Disk: 20},
			{ID: "3", Name: "m1.medium", VCPUs: 2, RAM: 4096, Disk: 40}, {ID: "4", Name: "m1.large", VCPUs: 4, RAM: 8192, Disk: 80}},
		Networks: []Network{{ID: "n-ext", Name: "external", External: true}, {ID: "n-t", Name: "osd-net"}},
		Subnets: []Subnet{{ID: "s-ext", Name: "external-subnet", NetworkID: "n-ext", CIDR: "172.24.4.0/24"},
			{ID: "s-t", Name: "osd-subnet", NetworkID: "n-t", CIDR: "10.20.0.0/24"}},
		Routers: []Router{{ID: "r1", Name: "osd-router", Gateway: &struct {
			NetworkID        string `json:"network_id"`
			ExternalFixedIPs []struct {
				SubnetID  string `json:"subnet_id"`
				IPAddress string `json:"ip_address"`
			} `json:"external_fixed_ips"`
		}{NetworkID: "n-ext"}}},
		RouterSubnets: map[string][]string{"r1": {"s-t"}},
		SecurityGroup: &SecurityGroup{ID: "sg", Name: "default", Rules: []SecurityGroupRule{
			{Direction: "egress", EtherType: "IPv4"},
			{Direction: "ingress", EtherType: "IPv4", RemoteGroupID: "sg"},
			{Direction: "ingress", EtherType: "IPv4", Protocol: "icmp", RemoteIPPrefix: "0.0.0.0/0"},
			{Direction: "ingress", EtherType: "IPv4", Protocol: "tcp", PortMin: intp(22), PortMax: intp(22), RemoteIPPrefix: "0.0.0.0/0"},
		}},
		Images: []Image{
			{ID: "k1", Name: "osd-test-kernel", Status: "active", GuestKey: "key1", DiskFormat: "aki"},
			{ID: "r1", Name: "osd-test-ramdisk", Status: "active", GuestKey: "key1", DiskFormat: "ari"},
			{ID: "m1", Name: "osd-test", Status: "active", GuestKey: "key1", KernelID: "k1", RamdiskID: "r1", DiskFormat: "raw"},
		},
		Keypairs: []Keypair{{Name: DefaultKeyName, PublicKey: testPublicKey}},
	}
}

const testPublicKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOv2n5pd0bU4Cq1y6nW3tqyA3Ahl3Zr9dIhUGl0WbW5I"

func desired(t *testing.T) Desired {
	d, err := DefaultDesired("172.24.4.0/24", "172.24.4.1")
	if err != nil {
		t.Fatal(err)
	}
	d.Images = &ImagesSpec{Kernel: KernelImageName, Ramdisk: RamdiskImageName, Machine: MachineImageName, Key: "key1"}
	d.Keypair = &KeypairSpec{Name: DefaultKeyName, PublicKey: testPublicKey}
	return d
}

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Observed, *Desired)
		want   string
	}{
		{"converged", func(*Observed, *Desired) {}, ""},
		{"empty cloud", func(o *Observed, _ *Desired) { *o = Observed{SecurityGroup: &SecurityGroup{ID: "sg", Name: "default"}} },
			"create-flavor m1.tiny; create-flavor m1.small; create-flavor m1.medium; create-flavor m1.large; " +
				"create-network external; create-subnet external-subnet on external; create-network osd-net; create-subnet osd-subnet on osd-net; " +
				"create-router osd-router; add-router-interface osd-router -> osd-subnet; " +
				"add-security-group-rule default: ingress icmp; add-security-group-rule default: ingress tcp 22; " +
				"upload-image osd-test-kernel; upload-image osd-test-ramdisk; upload-image osd-test; create-keypair osd-key"},
		{"flavor differs", func(o *Observed, _ *Desired) { o.Flavors[0].RAM = 512 },
			"warning: flavor m1.tiny has 1 vCPU, 512 MiB, 1 GB; day-one would make 1, 256, 1 (left as is)"},
		{"one flavor missing", func(o *Observed, _ *Desired) { o.Flavors = o.Flavors[1:] }, "create-flavor m1.tiny"},
		{"subnet missing", func(o *Observed, _ *Desired) { o.Subnets = o.Subnets[:1]; o.RouterSubnets = nil },
			"create-subnet osd-subnet on osd-net; add-router-interface osd-router -> osd-subnet"},
		{"router without gateway", func(o *Observed, _ *Desired) { o.Routers[0].Gateway = nil }, "set-router-gateway osd-router -> external"},
		{"router interface missing", func(o *Observed, _ *Desired) { o.RouterSubnets = map[string][]string{} }, "add-router-interface osd-router -> osd-subnet"},
		{"no external network wanted", func(o *Observed, d *Desired) {
			d.External = nil
			o.Networks, o.Subnets = o.Networks[1:], o.Subnets[1:]
		}, ""},
		{"network not external", func(o *Observed, _ *Desired) { o.Networks[0].External = false },
			"warning: network external has router:external=false, want true (left as is)"},
		{"rules missing", func(o *Observed, _ *Desired) { o.SecurityGroup.Rules = o.SecurityGroup.Rules[:2] },
			"add-security-group-rule default: ingress icmp; add-security-group-rule default: ingress tcp 22"},
		{"tcp rule from one network only", func(o *Observed, _ *Desired) { o.SecurityGroup.Rules[3].RemoteIPPrefix = "10.0.0.0/8" },
			"add-security-group-rule default: ingress tcp 22"},
		{"port range covers 22", func(o *Observed, _ *Desired) {
			o.SecurityGroup.Rules[3].PortMin, o.SecurityGroup.Rules[3].PortMax = intp(1), intp(1024)
		}, ""},
		{"any protocol allowed", func(o *Observed, _ *Desired) {
			o.SecurityGroup.Rules = []SecurityGroupRule{{Direction: "ingress", EtherType: "IPv4"}}
		}, ""},
		{"no security group", func(o *Observed, _ *Desired) { o.SecurityGroup = nil },
			"warning: the admin project has no security group default: rules [{icmp 0} {tcp 22}] not added"},
		{"new guest image", func(_ *Observed, d *Desired) { d.Images.Key = "key2" },
			"upload-image osd-test-kernel; upload-image osd-test-ramdisk; upload-image osd-test; " +
				"delete-image osd-test-kernel (k1); delete-image osd-test-ramdisk (r1); delete-image osd-test (m1)"},
		{"machine image upload interrupted", func(o *Observed, _ *Desired) { o.Images[2].Status = "queued" },
			"upload-image osd-test; delete-image osd-test (m1)"},
		{"kernel replaced by hand", func(o *Observed, _ *Desired) { o.Images[0].ID = "k9" },
			"upload-image osd-test; delete-image osd-test (m1)"},
		{"duplicate machine image", func(o *Observed, _ *Desired) {
			o.Images = append(o.Images, Image{ID: "m2", Name: "osd-test", Status: "active", GuestKey: "key1", KernelID: "k1", RamdiskID: "r1", DiskFormat: "raw"})
		}, "delete-image osd-test (m2)"},
		{"another kernel command line", func(_ *Observed, d *Desired) { d.Images.CommandLine = "console=ttyS0" },
			"upload-image osd-test; delete-image osd-test (m1)"},
		{"machine image was an AMI", func(o *Observed, _ *Desired) { o.Images[2].DiskFormat = "ami" },
			"upload-image osd-test; delete-image osd-test (m1)"},
		{"no images wanted", func(o *Observed, d *Desired) { d.Images = nil; o.Images = nil }, ""},
		{"keypair missing", func(o *Observed, _ *Desired) {
			o.Keypairs = []Keypair{{Name: "someone-else", PublicKey: testPublicKey}}
		}, "create-keypair osd-key"},
		{"keypair of another key", func(o *Observed, _ *Desired) {
			o.Keypairs[0].PublicKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBmRDHsTfJvkjeCpDbA0HLiNIhJHTX8wcrQsUyP6rGQ0 osd-key"
		}, "replace-keypair osd-key"},
		{"keypair with another comment", func(o *Observed, _ *Desired) { o.Keypairs[0].PublicKey = testPublicKey + " Generated-by-Nova" }, ""},
		{"no keypair wanted", func(o *Observed, d *Desired) { d.Keypair = nil; o.Keypairs = nil }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs, want := converged(), desired(t)
			tc.mutate(&obs, &want)
			if got := ops(Plan(obs, want)); got != tc.want {
				t.Errorf("Plan(%s) = %q, want %q", tc.name, got, tc.want)
			}
		})
	}
}

func TestChanges(t *testing.T) {
	o := []Op{{Kind: OpWarn}, {Kind: OpCreateFlavor}, {Kind: OpWarn}}
	if got := Changes(o); got != 1 {
		t.Errorf("Changes(warn, create, warn) = %d, want 1", got)
	}
}

func TestForCatalog(t *testing.T) {
	cat := func(types ...string) []CatalogEntry {
		var c []CatalogEntry
		for _, ty := range types {
			c = append(c, CatalogEntry{Type: ty})
		}
		return c
	}
	for _, tc := range []struct {
		name    string
		catalog []CatalogEntry
		skipped string
		plan    string
	}{
		{"all services", cat("identity", "compute", "network", "image"), "", ""},
		{"keystone and glance only", cat("identity", "image"), "flavors, keypair (no compute service); networks, router, security group rules (no network service)", ""},
		{"no glance", cat("identity", "compute", "network"), "images (no image service)", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := desired(t)
			got, skipped := ForCatalog(want, tc.catalog)
			if strings.Join(skipped, "; ") != tc.skipped {
				t.Errorf("ForCatalog(%s) skipped %q, want %q", tc.name, skipped, tc.skipped)
			}
			// On an empty cloud the trimmed plan touches only the services present.
			for _, op := range Plan(Observed{SecurityGroup: &SecurityGroup{ID: "sg"}}, got) {
				svc := map[OpKind]string{OpCreateFlavor: "compute", OpCreateNetwork: "network", OpCreateSubnet: "network", OpCreateRouter: "network",
					OpAddRouterInterface: "network", OpAddRule: "network", OpUploadImage: "image", OpCreateKeypair: "compute"}[op.Kind]
				found := false
				for _, e := range tc.catalog {
					found = found || e.Type == svc
				}
				if !found {
					t.Errorf("Plan(ForCatalog(%s)) has %s, which needs the missing %s service", tc.name, op, svc)
				}
			}
		})
	}
}
