package storage

import (
	"os"
	"strings"
	"testing"

	"github.com/osdcloud/osd/daemon/api"
)

// TestParseCeph reads what Debian's Ceph 16.2 answered on a one-node cluster made by the
// ceph chart (testdata/healthy.txt: the output of Commands, refreshed by the charts
// package's TestCephInDebianImage with OSD_CEPH_STATUS_SAMPLE) and a degraded variant.
func TestParseCeph(t *testing.T) {
	b, err := os.ReadFile("testdata/healthy.txt")
	if err != nil {
		t.Fatal(err)
	}
	var st api.StorageStatus
	if err := ParseCeph(string(b), &st); err != nil {
		t.Fatal(err)
	}
	if st.Health != "HEALTH_OK" || len(st.Checks) != 0 || st.OSDs != 1 || st.OSDsUp != 1 {
		t.Errorf("ParseCeph(healthy) health %s checks %v osds %d/%d, want HEALTH_OK, none, 1/1", st.Health, st.Checks, st.OSDsUp, st.OSDs)
	}
	if st.TotalBytes <= 0 || st.AvailBytes <= 0 || st.UsedBytes <= 0 || st.AvailBytes+st.UsedBytes > st.TotalBytes+1<<20 {
		t.Errorf("ParseCeph(healthy) total %d used %d avail %d, want consistent figures", st.TotalBytes, st.UsedBytes, st.AvailBytes)
	}
	var names []string
	for _, p := range st.Pools {
		names = append(names, p.Name)
		if p.Replicas != 1 || p.PGs == 0 || p.MaxAvailBytes <= 0 {
			t.Errorf("pool %+v, want 1 replica, its PGs and the space left", p)
		}
	}
	if got := strings.Join(names, ","); got != "backups,device_health_metrics,images,vms,volumes" {
		t.Errorf("pools = %s, want backups, device_health_metrics (the manager's), images, vms, volumes (sorted)", got)
	}
	if !strings.Contains(st.Note, "1 replica") {
		t.Errorf("Note = %q, want the one-replica explanation", st.Note)
	}

	// A cluster with its OSD down: the checks come with their messages, errors first.
	deg := strings.Replace(string(b), `"status":"HEALTH_OK","checks":{}`, `"status":"HEALTH_ERR","checks":{`+
		`"OSD_DOWN":{"severity":"HEALTH_WARN","summary":{"message":"1 osds down","count":1},"muted":false},`+
		`"PG_AVAILABILITY":{"severity":"HEALTH_ERR","summary":{"message":"Reduced data availability: 80 pgs inactive","count":80},"muted":false}}`, 1)
	if deg == string(b) {
		t.Fatal("testdata/healthy.txt does not have the expected health document")
	}
	if err := ParseCeph(deg, &st); err != nil {
		t.Fatal(err)
	}
	if st.Health != "HEALTH_ERR" || len(st.Checks) != 2 || st.Checks[0].Code != "PG_AVAILABILITY" || st.Checks[1].Message != "1 osds down" {
		t.Errorf("ParseCeph(degraded) = %s %+v, want HEALTH_ERR with PG_AVAILABILITY first, then OSD_DOWN", st.Health, st.Checks)
	}

	for name, out := range map[string]string{"two answers": "{}" + Separator + "{}", "not JSON": "x" + Separator + "{}" + Separator + "[]"} {
		if err := ParseCeph(out, &st); err == nil {
			t.Errorf("ParseCeph(%s) = nil, want an error", name)
		}
	}
}
