package api

import (
	"fmt"
	"strconv"
	"strings"
)

// StorageStatus is GET /1.0/storage: the block storage backend of this cloud, why it was
// chosen, and with Ceph the cluster's health and space.
type StorageStatus struct {
	Backend   string `json:"backend"`              // ceph | lvm | none
	Reason    string `json:"reason,omitempty"`     // why this backend (the host probe, or osd init --storage)
	SizeBytes int64  `json:"size_bytes,omitempty"` // the size osd gave the OSD's block file or the volume group
	// Ceph only. Health is HEALTH_OK, HEALTH_WARN or HEALTH_ERR; Checks say why it is not OK.
	Health     string         `json:"health,omitempty"`
	Checks     []StorageCheck `json:"checks,omitempty"`
	TotalBytes int64          `json:"total_bytes,omitempty"`
	UsedBytes  int64          `json:"used_bytes,omitempty"`
	AvailBytes int64          `json:"avail_bytes,omitempty"`
	OSDsUp     int            `json:"osds_up,omitempty"`
	OSDs       int            `json:"osds,omitempty"`
	Pools      []StoragePool  `json:"pools,omitempty"`
	// Note says what is by design rather than a fault (one replica on one node).
	Note string `json:"note,omitempty"`
	// Error says why the status could not be read (Ceph not deployed yet, its monitor down).
	Error string `json:"error,omitempty"`
}

// StorageCheck is one Ceph health check that is not OK.
type StorageCheck struct {
	Code     string `json:"code"`     // e.g. OSD_DOWN
	Severity string `json:"severity"` // HEALTH_WARN | HEALTH_ERR
	Message  string `json:"message"`
}

// StoragePool is one Ceph pool.
type StoragePool struct {
	Name          string `json:"name"`
	Replicas      int    `json:"replicas"`
	PGs           int    `json:"pgs"`
	StoredBytes   int64  `json:"stored_bytes"`
	Objects       int64  `json:"objects"`
	MaxAvailBytes int64  `json:"max_avail_bytes"`
}

// Storage backends (StorageStatus.Backend, InitRequest.StorageBackend).
const (
	StorageCeph = "ceph" // a single-node Ceph osd runs: RBD, all in userspace
	StorageLVM  = "lvm"  // the loop-backed LVM volume group cinder-volumes over iSCSI
	StorageNone = "none" // no block storage
)

// MinStorageBytes is the smallest block storage osd makes (InitRequest.StorageSize):
// BlueStore's own metadata and Ceph's 95% full ratio leave about 3 GiB of 4 for volumes,
// images and backups.
const MinStorageBytes = int64(4) << 30

// ParseSize reads a size such as "20G", "20GiB", "512M", "1T" or plain bytes. Units are
// binary (K, M, G, T = 1024^n), with or without "i" and "B".
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToUpper(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult != 1 {
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || v <= 0 || v*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("size %q: want a positive number with an optional unit K, M, G or T (e.g. 50G)", s)
	}
	return int64(v * float64(mult)), nil
}
