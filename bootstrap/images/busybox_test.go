package images

import (
	"archive/tar"
	"os"
	"testing"

	"github.com/osdcloud/osd/bootstrap/images/oci/ocitest"
)

func TestBusyboxImage(t *testing.T) {
	if _, err := os.Stat(BusyboxPath); err != nil {
		t.Fatalf("busybox-static not installed (test/deps.sh installs it): %v", err)
	}
	img, ref, err := BusyboxImage()
	if err != nil {
		t.Fatalf("BusyboxImage() = %v", err)
	}
	d, _ := img.Digest()
	if ref != "localhost/osd/busybox:"+d.Hex[:12] {
		t.Errorf("BusyboxImage() ref = %s, want localhost/osd/busybox:%s", ref, d.Hex[:12])
	}
	layers, _ := img.Layers()
	got, _ := ocitest.ReadLayer(t, layers[0])
	if e := got["bin/sh"]; e.Type != tar.TypeSymlink || e.Link != "busybox" {
		t.Errorf("BusyboxImage() bin/sh = %+v, want symlink to busybox", e)
	}
	if e := got["bin/busybox"]; e.Type != tar.TypeReg || e.Mode != 0o755 || e.Size < 100000 {
		t.Errorf("BusyboxImage() bin/busybox = %+v, want 0755 regular file", e)
	}
	if e := got["tmp/"]; e.Mode != 0o1777 {
		t.Errorf("BusyboxImage() tmp/ mode = %o, want 1777", e.Mode)
	}
}
