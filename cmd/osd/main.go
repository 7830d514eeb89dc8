// Command osd turns a Linux host into an OpenStack cloud: the daemon, its CLI and, under
// other names (containerd, kubectl, ctr, crictl), the tools of the embedded Kubernetes.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/osdcloud/osd/daemon/k3s"
)

func main() {
	if k3s.Multicall(os.Args) {
		return
	}
	if err := newRootCmd().Execute(); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

// exitError ends the process with a code and no further message (already printed).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }
