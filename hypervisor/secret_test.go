package hypervisor

import (
	"io/fs"
	"regexp"
	"testing"

	"github.com/osdcloud/osd/charts"
)

// TestIsOSDSecret: osd reset removes the libvirt secret the nova chart defines, and no other.
func TestIsOSDSecret(t *testing.T) {
	tpl, err := fs.ReadFile(charts.FS, "nova/templates/_nova.tpl")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`<usage type='ceph'><name>([^<]+)</name>`).FindSubmatch(tpl)
	if m == nil || !IsOSDSecret(string(m[1])) {
		t.Fatalf("the nova chart's libvirt secret usage %q is not one osd reset removes", m)
	}
	for _, other := range []string{"client.cinder secret", "ceph client.admin", ""} {
		if IsOSDSecret(other) {
			t.Errorf("IsOSDSecret(%q) = true, want false (not osd's)", other)
		}
	}
}
