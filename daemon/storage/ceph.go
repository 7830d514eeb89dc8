package storage

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/osdcloud/osd/daemon/api"
)

// Separator is printed between the JSON documents of one `ceph` exec (status, df, pools).
const Separator = "--- osd ---"

// Commands is the shell command whose output ParseCeph reads: three ceph CLI calls as
// client.admin in the monitor's pod.
func Commands() []string {
	return []string{"/bin/sh", "-ec", "ceph --connect-timeout 10 status -f json; echo '" + Separator + "'; " +
		"ceph --connect-timeout 10 df -f json; echo '" + Separator + "'; ceph --connect-timeout 10 osd pool ls detail -f json"}
}

type cephStatus struct {
	Health struct {
		Status string `json:"status"`
		Checks map[string]struct {
			Severity string `json:"severity"`
			Summary  struct {
				Message string `json:"message"`
			} `json:"summary"`
		} `json:"checks"`
		Mutes []struct {
			Code string `json:"code"`
		} `json:"mutes"`
	} `json:"health"`
	OSDMap struct {
		NumOSDs   int `json:"num_osds"`
		NumUpOSDs int `json:"num_up_osds"`
	} `json:"osdmap"`
}

// DF is what `ceph df -f json` says of the cluster and its pools.
type DF struct {
	Stats struct {
		Total int64 `json:"total_bytes"`
		Used  int64 `json:"total_used_raw_bytes"`
		Avail int64 `json:"total_avail_bytes"`
	} `json:"stats"`
	Pools []struct {
		Name  string `json:"name"`
		Stats struct {
			Stored   int64 `json:"stored"`
			Objects  int64 `json:"objects"`
			MaxAvail int64 `json:"max_avail"`
		} `json:"stats"`
	} `json:"pools"`
}

// Stored is the bytes pool stores (-1 when there is no such pool).
func (d DF) Stored(pool string) int64 {
	for _, p := range d.Pools {
		if p.Name == pool {
			return p.Stats.Stored
		}
	}
	return -1
}

type cephPool struct {
	Name string `json:"pool_name"`
	Size int    `json:"size"`
	PGs  int    `json:"pg_num"`
}

// ParseCeph fills st's Ceph fields from the output of Commands. Pools are sorted by name;
// the health checks by severity (errors first), then code.
func ParseCeph(out string, st *api.StorageStatus) error {
	parts := strings.Split(out, Separator)
	if len(parts) != 3 {
		return fmt.Errorf("ceph: want 3 answers (status, df, pools), got %d: %.200s", len(parts), out)
	}
	var s cephStatus
	if err := json.Unmarshal([]byte(parts[0]), &s); err != nil {
		return fmt.Errorf("ceph status: %w", err)
	}
	var df DF
	if err := json.Unmarshal([]byte(parts[1]), &df); err != nil {
		return fmt.Errorf("ceph df: %w", err)
	}
	var pools []cephPool
	if err := json.Unmarshal([]byte(parts[2]), &pools); err != nil {
		return fmt.Errorf("ceph osd pool ls: %w", err)
	}
	st.Health = s.Health.Status
	st.Checks = nil
	for code, c := range s.Health.Checks {
		st.Checks = append(st.Checks, api.StorageCheck{Code: code, Severity: c.Severity, Message: c.Summary.Message})
	}
	sort.Slice(st.Checks, func(i, j int) bool {
		a, b := st.Checks[i], st.Checks[j]
		if a.Severity != b.Severity {
			return a.Severity == "HEALTH_ERR"
		}
		return a.Code < b.Code
	})
	st.OSDs, st.OSDsUp = s.OSDMap.NumOSDs, s.OSDMap.NumUpOSDs
	st.TotalBytes, st.UsedBytes, st.AvailBytes = df.Stats.Total, df.Stats.Used, df.Stats.Avail
	size := map[string]cephPool{}
	for _, p := range pools {
		size[p.Name] = p
	}
	st.Pools = nil
	minReplicas := 0
	for _, p := range df.Pools {
		pool := api.StoragePool{Name: p.Name, Replicas: size[p.Name].Size, PGs: size[p.Name].PGs,
			StoredBytes: p.Stats.Stored, Objects: p.Stats.Objects, MaxAvailBytes: p.Stats.MaxAvail}
		st.Pools = append(st.Pools, pool)
		if minReplicas == 0 || pool.Replicas < minReplicas {
			minReplicas = pool.Replicas
		}
	}
	sort.Slice(st.Pools, func(i, j int) bool { return st.Pools[i].Name < st.Pools[j].Name })
	if minReplicas == 1 {
		st.Note = "1 replica per pool: this single-node Ceph keeps one copy of each object (no redundancy; Ceph's POOL_NO_REDUNDANCY warning is off by design)"
	}
	return nil
}
