package daemon

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/osdcloud/osd/bootstrap/fsutil"
	"github.com/osdcloud/osd/daemon/client"
)

// lockStateDir takes an exclusive lock on the state dir so that a second daemon refuses to
// start; the lock dies with the process.
func lockStateDir(dir string) (func(), error) {
	unlock, pid, err := fsutil.Lock(filepath.Join(dir, client.DaemonLockFile))
	if errors.Is(err, fsutil.ErrLocked) {
		return nil, fmt.Errorf("another osd daemon (pid %d) is already running on state dir %s: stop it first (systemctl stop osd, or kill it) or use another --state-dir", pid, dir)
	}
	return unlock, err
}
