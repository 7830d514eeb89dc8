package images

import (
	"os"
	"path/filepath"
	"testing"
)

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

// TestFindDeb: an architecture-independent package is downloaded as _all.deb.
func TestFindDeb(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"python3-amqp_5.1.1-1_all.deb", "busybox-static_1%3a1.35.0-4+b3_amd64.deb"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ name, version, want string }{
		{"python3-amqp", "5.1.1-1", "python3-amqp_5.1.1-1_all.deb"},
		{"busybox-static", "1:1.35.0-4+b3", "busybox-static_1%3a1.35.0-4+b3_amd64.deb"},
		{"python3-amqp", "5.1.1-2", ""},
	} {
		got, ok := findDeb(dir, tc.name, tc.version)
		if filepath.Base(got) != tc.want && !(tc.want == "" && !ok) {
			t.Errorf("findDeb(%s, %s) = %q, %v; want %q", tc.name, tc.version, got, ok, tc.want)
		}
	}
}
