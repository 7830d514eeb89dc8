package images

import (
	"fmt"
	"runtime"
)

// checkArch reports whether the images built here can run on this host.
func checkArch() error {
	if runtime.GOARCH != "amd64" {
		return fmt.Errorf("images: unsupported architecture %s (only amd64 is supported)", runtime.GOARCH)
	}
	return nil
}
