package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/osdcloud/osd/daemon/api"
)

func TestParseStorageSize(t *testing.T) {
	for in, want := range map[string]int64{"": 0, "50G": 50 << 30, "4GiB": 4 << 30} {
		var req api.InitRequest
		if err := parseStorageSize(in, &req); err != nil || req.StorageSize != want {
			t.Errorf("parseStorageSize(%q) = %d, %v, want %d", in, req.StorageSize, err, want)
		}
	}
	for in, msg := range map[string]string{"1G": "below the minimum of 4.0 GiB: nothing was changed", "many": "--storage-size: size \"many\""} {
		var req api.InitRequest
		if err := parseStorageSize(in, &req); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("parseStorageSize(%q) = %v, want %q", in, err, msg)
		}
	}
}

func TestStatusTableStorage(t *testing.T) {
	st := statusView{ServerInfo: api.ServerInfo{State: api.StateRunning}, Storage: &api.StorageStatus{
		Backend: "ceph", Reason: "no device-mapper", SizeBytes: 20 << 30, Health: "HEALTH_WARN",
		Checks:     []api.StorageCheck{{Code: "OSD_DOWN", Severity: "HEALTH_WARN", Message: "1 osds down"}},
		TotalBytes: 20 << 30, UsedBytes: 1 << 30, AvailBytes: 19 << 30, OSDs: 1,
		Pools: []api.StoragePool{{Name: "volumes", Replicas: 1, PGs: 32, StoredBytes: 1 << 30, Objects: 256, MaxAvailBytes: 18 << 30}},
		Note:  "1 replica per pool",
	}}
	var b bytes.Buffer
	if err := render(&b, "table", st, statusTable(st)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"storage  ceph (20.0 GiB): no device-mapper", "HEALTH_WARN, 0/1 OSDs up, 1.0 GiB used, 19.0 GiB free of 20.0 GiB",
		"OSD_DOWN  HEALTH_WARN: 1 osds down", "pool volumes  1 replica(s), 32 PGs, 1.0 GiB stored, 256 objects, 18.0 GiB available", "note  1 replica per pool"} {
		if !strings.Contains(strings.Join(strings.Fields(b.String()), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("status table =\n%s\nwant it to contain %q", b.String(), want)
		}
	}
}

func TestParseVolumeSize(t *testing.T) {
	for in, want := range map[string]int{"": 0, "1G": 1, "1": 1, "10": 10, "1.5G": 2, "10GiB": 10, "512M": 1} {
		var req api.LaunchRequest
		if err := parseVolumeSize(in, &req); err != nil || req.VolumeGB != want {
			t.Errorf("parseVolumeSize(%q) = %d, %v, want %d GiB", in, req.VolumeGB, err, want)
		}
	}
	for _, in := range []string{"big", "0", "-1"} {
		var req api.LaunchRequest
		if err := parseVolumeSize(in, &req); err == nil || !strings.Contains(err.Error(), "--volume") {
			t.Errorf("parseVolumeSize(%q) = %v, want an error naming --volume", in, err)
		}
	}
}
