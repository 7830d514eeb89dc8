// Package images owns every container image osd runs: the image recipes
// (Debian packages, users, files, entrypoint), the mmdebstrap driver that
// builds a root filesystem from the host's Debian mirror, the in-process OCI
// packing (go-containerregistry, no Docker engine), the build cache keyed by
// recipe and resolved package versions, the docker-save archives the embedded
// k3s imports at start, and the airgap bundle that moves images between hosts.
//
// It also generates the pause image k3s needs from a hand-assembled static
// x86-64 executable (see PauseBinary), so no toolchain or registry is needed.
package images
