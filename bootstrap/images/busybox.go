package images

import (
	"fmt"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/osdcloud/osd/bootstrap/images/oci"
)

// BusyboxPath is where Debian's busybox-static package installs busybox.
const BusyboxPath = "/bin/busybox"

// busyboxApplets are the commands linked to busybox in the busybox image.
var busyboxApplets = []string{"sh", "echo", "sleep", "cat", "ls", "true", "false", "env", "wget", "nc", "ip", "ps"}

// BusyboxImage returns a small image holding the host's static busybox
// (Debian package busybox-static) with symlinks for common applets in /bin,
// and the reference to tag it with: localhost/osd/busybox:<first 12 hex of
// the image digest>. It is meant for smoke tests (a pod that prints a line).
func BusyboxImage() (v1.Image, string, error) {
	if err := checkArch(); err != nil {
		return nil, "", err
	}
	bin, err := os.ReadFile(BusyboxPath)
	if err != nil {
		return nil, "", fmt.Errorf("busybox image: %w (install the busybox-static package)", err)
	}
	files := []File{
		{Path: "bin/busybox", Mode: 0o755, Data: bin},
		{Path: "tmp", Mode: os.ModeDir | os.ModeSticky | 0o777},
		{Path: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")},
		{Path: "etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnogroup:x:65534:\n")},
	}
	for _, a := range busyboxApplets {
		files = append(files, File{Path: "bin/" + a, Link: "busybox"})
	}
	img, err := oci.ImageFromFiles(files, ImageConfig{
		Cmd:    []string{"/bin/sh"},
		Env:    []string{"PATH=/bin"},
		Labels: map[string]string{"org.osdcloud.osd.image": "busybox"},
	})
	if err != nil {
		return nil, "", fmt.Errorf("busybox image: %w", err)
	}
	d, err := img.Digest()
	if err != nil {
		return nil, "", fmt.Errorf("busybox image: %w", err)
	}
	return img, "localhost/osd/busybox:" + d.Hex[:12], nil
}
