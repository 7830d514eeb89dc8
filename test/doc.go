// Package test holds osd's end-to-end suites: they run the built osd binary (OSD_BIN, or
// ../bin/osd from `make build`) as root against the real embedded Kubernetes, containerd,
// Open vSwitch and libvirt on this host, and clean up what they create.
package test
