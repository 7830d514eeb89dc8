package main

import (
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/osdcloud/osd/daemon/api"
)

// addStorageFlags adds osd init's block storage flags.
func addStorageFlags(cmd *cobra.Command, req *api.InitRequest, size *string) {
	cmd.Flags().StringVar(size, "storage-size", "", fmt.Sprintf("size of the block storage (Ceph's OSD file or the LVM volume group), e.g. 50G; default a quarter of the free disk, at least %s; a later init can grow it",
		gibText(api.MinStorageBytes)))
	cmd.Flags().StringVar(&req.StorageBackend, "storage", "", "block storage backend: ceph, lvm or none (default: lvm where the kernel has device-mapper and iSCSI, else ceph)")
}

// parseStorageSize reads --storage-size into req (the daemon checks it against the disk).
func parseStorageSize(s string, req *api.InitRequest) error {
	if s == "" {
		return nil
	}
	n, err := api.ParseSize(s)
	if err != nil {
		return fmt.Errorf("--storage-size: %w", err)
	}
	if n < api.MinStorageBytes {
		return fmt.Errorf("--storage-size %s is below the minimum of %s: nothing was changed", s, gibText(api.MinStorageBytes))
	}
	req.StorageSize = n
	return nil
}

// parseVolumeSize reads osd launch --volume into whole GiB (rounded up: Cinder sizes
// volumes in GiB); a plain number is GiB, as in openstack volume create --size.
func parseVolumeSize(s string, req *api.LaunchRequest) error {
	if s == "" {
		return nil
	}
	if n, err := strconv.Atoi(s); err == nil && n > 0 {
		req.VolumeGB = n
		return nil
	}
	n, err := api.ParseSize(s)
	if err != nil {
		return fmt.Errorf("--volume: %w", err)
	}
	req.VolumeGB = int((n + 1<<30 - 1) >> 30)
	return nil
}

func gibText(b int64) string {
	return strconv.FormatFloat(float64(b)/(1<<30), 'f', 1, 64) + " GiB"
}

// storageLines writes the storage section of osd status.
func storageLines(tw *tabwriter.Writer, st *api.StorageStatus) {
	if st == nil {
		return
	}
	line := st.Backend
	if st.SizeBytes > 0 {
		line += " (" + gibText(st.SizeBytes) + ")"
	}
	if st.Reason != "" {
		line += ": " + st.Reason
	}
	fmt.Fprintf(tw, "storage\t%s\n", line)
	if st.Error != "" {
		fmt.Fprintf(tw, "  ceph\tunknown: %s\n", st.Error)
	}
	if st.Health == "" {
		return
	}
	fmt.Fprintf(tw, "  ceph\t%s, %d/%d OSDs up, %s used, %s free of %s\n", st.Health, st.OSDsUp, st.OSDs, gibText(st.UsedBytes), gibText(st.AvailBytes), gibText(st.TotalBytes))
	for _, c := range st.Checks {
		fmt.Fprintf(tw, "  %s\t%s: %s\n", c.Code, c.Severity, c.Message)
	}
	for _, p := range st.Pools {
		fmt.Fprintf(tw, "  pool %s\t%d replica(s), %d PGs, %s stored, %d objects, %s available\n", p.Name, p.Replicas, p.PGs, gibText(p.StoredBytes), p.Objects, gibText(p.MaxAvailBytes))
	}
	if st.Note != "" {
		fmt.Fprintf(tw, "  note\t%s\n", st.Note)
	}
}
