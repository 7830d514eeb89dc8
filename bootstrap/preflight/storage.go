package preflight

import (
	"fmt"

	"github.com/osdcloud/osd/daemon/api"
)

// Block storage sizing: Ceph's OSD (or the LVM volume group) is a sparse file under the
// state dir, sized once by osd init and grown by a later init asking for more.
const (
	// MinStorageBytes is the smallest storage osd makes (api.MinStorageBytes).
	MinStorageBytes = api.MinStorageBytes
	// MaxDefaultStorageBytes caps the default (a larger size must be asked for).
	MaxDefaultStorageBytes = 100 * gib
)

// DefaultStorageBytes is the size osd chooses when none is asked for: a quarter of the
// free space under the state dir (instance disks, images and logs need the rest), at
// least MinStorageBytes and at most MaxDefaultStorageBytes, in whole GiB.
func DefaultStorageBytes(freeBytes int64) int64 {
	n := freeBytes / 4 / gib * gib
	return min(max(n, MinStorageBytes), MaxDefaultStorageBytes)
}

// StorageSize decides the storage size from what was asked (0: nothing), the free space
// under the state dir and the current size (0: none made yet). A size is never shrunk
// (BlueStore and LVM volume groups cannot), never below the minimum, and never more than
// the free space can hold (the file is sparse: overcommitting the disk would fill it under
// the OSD). It is pure.
func StorageSize(requested, freeBytes, current int64) (int64, error) {
	switch {
	case requested == 0 && current > 0:
		return current, nil
	case requested == 0:
		def := DefaultStorageBytes(freeBytes)
		if def > freeBytes {
			return 0, fmt.Errorf("only %s free under the state dir: block storage needs at least %s (free space, or set another state dir)",
				gibString(freeBytes), gibString(MinStorageBytes))
		}
		return def, nil
	case requested < MinStorageBytes:
		return 0, fmt.Errorf("storage size %s is below the minimum of %s: ask for %s or more", gibString(requested), gibString(MinStorageBytes), gibString(MinStorageBytes))
	case current > 0 && requested < current:
		return 0, fmt.Errorf("storage size %s is smaller than the %s already made: it can grow but not shrink (keep %s or more)", gibString(requested), gibString(current), gibString(current))
	case requested-current > freeBytes:
		return 0, fmt.Errorf("storage size %s does not fit: %s free under the state dir (the file is sparse, but it would fill the disk as volumes are written)",
			gibString(requested), gibString(freeBytes+current))
	}
	return requested, nil
}

// FreeBytes is the space available to osd under dir (or its nearest existing parent).
func FreeBytes(dir string) (int64, error) {
	_, free, err := diskFree(dir)
	return free, err
}
