package guest

import "testing"

func TestParseConsole(t *testing.T) {
	for _, tc := range []struct {
		name string
		log  string
		want Console
	}{
		{"empty", "", Console{}},
		{"kernel only", "[    0.000000] Linux version 6.1.0\n", Console{}},
		{"started", "[    1.2] Run /init\r\nosd-guest: init started, kernel 6.1.0-28-cloud-amd64, uptime 2.01\r\n", Console{Started: true, InitUptime: 2.01}},
		{"lease failed", "osd-guest: init started\nosd-guest: eth0 no DHCP lease yet (leasefail)\n", Console{Started: true, LeaseFail: true}},
		{"up", "osd-guest: init started\nosd-guest: eth0 no DHCP lease yet (leasefail)\nosd-guest: eth0 10.20.0.5/24 up gateway 10.20.0.1 mtu 1442\n",
			Console{Started: true, Address: "10.20.0.5/24", Gateway: "10.20.0.1"}},
		{"up then renew failure", "osd-guest: eth0 10.20.0.5/24 up gateway none mtu default\nosd-guest: eth0 no DHCP lease yet (nak)\n",
			Console{Started: true, Address: "10.20.0.5/24", Gateway: "none"}},
		{"metadata", "osd-guest: eth0 10.20.0.5/24 up gateway 10.20.0.1 mtu 1442\r\nosd-guest: metadata uuid 3f1c9a4e-0b6d-4c8e-9f3a-2d7e5b1c0a99\r\n",
			Console{Started: true, Address: "10.20.0.5/24", Gateway: "10.20.0.1", MetadataUUID: "3f1c9a4e-0b6d-4c8e-9f3a-2d7e5b1c0a99"}},
		{"metadata unreachable", "osd-guest: eth0 10.20.0.5/24 up gateway 10.20.0.1 mtu 1442\nosd-guest: metadata unreachable (http://169.254.169.254/openstack/latest/meta_data.json gave no answer for a minute)\n",
			Console{Started: true, Address: "10.20.0.5/24", Gateway: "10.20.0.1", MetadataFail: true}},
		{"ssh and config drive", "osd-guest: ssh host key ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOv+q/0=\r\nosd-guest: ssh server listening on port 22\r\n" +
			"osd-guest: config drive config-2 on /dev/sr0: uuid 3f1c9a4e-0b6d-4c8e-9f3a-2d7e5b1c0a99\r\nosd-guest: hostname web-1 (from the config drive)\r\n" +
			"osd-guest: ssh keys osd-key other installed for osd (from the metadata service)\r\n",
			Console{Started: true, SSHHostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOv+q/0=", SSHListening: true, ConfigDrive: "/dev/sr0",
				ConfigDriveUUID: "3f1c9a4e-0b6d-4c8e-9f3a-2d7e5b1c0a99", Hostname: "web-1", SSHKeys: "osd-key other"}},
		{"no config drive", "osd-guest: init started\nosd-guest: no config drive\n", Console{Started: true, NoConfigDrive: true}},
		{"no nic", "osd-guest: init started\nosd-guest: no eth0 (interfaces: lo )\n", Console{Started: true, NoNIC: true}},
		{"lease with uptime", "osd-guest: init started, kernel 6.1.0, uptime 3.5\nosd-guest: eth0 10.20.0.5/24 up gateway 10.20.0.1 mtu 1442 uptime 6.25\r\n",
			Console{Started: true, Address: "10.20.0.5/24", Gateway: "10.20.0.1", InitUptime: 3.5, LeaseUptime: 6.25}},
		{"ssh with uptime", "osd-guest: init started, kernel 6.1.0, uptime 1.5\nosd-guest: ssh server listening on port 22, uptime 2.75\n",
			Console{Started: true, InitUptime: 1.5, SSHListening: true, SSHUptime: 2.75}},
		{"prefixed by kernel timestamps", "[  5.1] osd-guest: eth0 192.168.1.9/24 up gateway 192.168.1.1 mtu default", Console{Started: true, Address: "192.168.1.9/24", Gateway: "192.168.1.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ParseConsole(tc.log); got != tc.want {
				t.Errorf("ParseConsole(%q) = %+v, want %+v", tc.log, got, tc.want)
			}
		})
	}
}

func TestSelectPackages(t *testing.T) {
	closure := map[string]string{"linux-image-cloud-amd64": "6.1.119-1", "linux-image-6.1.0-28-cloud-amd64": "6.1.119-1",
		"busybox-static": "1:1.35.0-4+b3", "kmod": "30+20221128-1", "initramfs-tools": "0.142"}
	got, err := selectPackages(closure)
	want := map[string]string{"linux-image-6.1.0-28-cloud-amd64": "6.1.119-1", "busybox-static": "1:1.35.0-4+b3"}
	if err != nil || len(got) != 2 || got["linux-image-6.1.0-28-cloud-amd64"] != "6.1.119-1" || got["busybox-static"] != "1:1.35.0-4+b3" {
		t.Errorf("selectPackages(closure) = %v, %v, want %v", got, err, want)
	}
	delete(closure, "linux-image-6.1.0-28-cloud-amd64")
	if _, err := selectPackages(closure); err == nil {
		t.Error("selectPackages(no kernel) = nil error, want an error")
	}
	if k1, k2 := CacheKey(want), CacheKey(map[string]string{"linux-image-6.1.0-28-cloud-amd64": "6.1.119-2", "busybox-static": "1:1.35.0-4+b3"}); k1 == k2 {
		t.Errorf("CacheKey(new kernel version) = %s, the same as before", k2)
	}
}
