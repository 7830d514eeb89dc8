package images

import "testing"

func TestDebFileName(t *testing.T) {
	for _, tc := range []struct{ name, version, want string }{
		{"busybox-static", "1:1.35.0-4+b3", "busybox-static_1%3a1.35.0-4+b3_amd64.deb"},
		{"linux-image-6.1.0-28-cloud-amd64", "6.1.119-1", "linux-image-6.1.0-28-cloud-amd64_6.1.119-1_amd64.deb"},
	} {
		if got := DebFileName(tc.name, tc.version); got != tc.want {
			t.Errorf("DebFileName(%q, %q) = %s, want %s", tc.name, tc.version, got, tc.want)
		}
	}
}
