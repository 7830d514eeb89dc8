package images

import (
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/osdcloud/osd/bootstrap/images/asm"
	"github.com/osdcloud/osd/bootstrap/images/oci"
)

// PauseRef is the sandbox image reference the embedded k3s expects.
const PauseRef = "docker.io/rancher/mirrored-pause:3.6"

// PauseImage returns the pod sandbox image: /pause (asm.PauseBinary) as its
// entrypoint, run as 65535:65535 like the upstream pause image.
func PauseImage() (v1.Image, error) {
	if err := checkArch(); err != nil {
		return nil, err
	}
	return oci.ImageFromFiles(
		[]File{{Path: "pause", Mode: 0o755, Data: asm.PauseBinary()}},
		ImageConfig{
			Entrypoint: []string{"/pause"},
			User:       "65535:65535",
			Labels:     map[string]string{"org.osdcloud.osd.image": "pause"},
		},
	)
}
