package preflight

import (
	"reflect"
	"regexp"
	"testing"
)

func TestHostPackages(t *testing.T) {
	tests := []struct {
		name string
		txt  string
		want map[string][]string
	}{
		{"empty", "", map[string][]string{}},
		{"comments and blank lines", "# a list\n\n  # indented\n", map[string][]string{}},
		{"both kinds, trailing comments", "depends a   # for x\nrecommends b\ndepends c-d\n",
			map[string][]string{"depends": {"a", "c-d"}, "recommends": {"b"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := HostPackages(tt.txt); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("HostPackages(%q) = %v, want %v", tt.txt, got, tt.want)
			}
		})
	}
	for _, bad := range []string{"depends", "needs x", "depends a b"} {
		t.Run("malformed "+bad, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("HostPackages(%q) did not panic, want a panic naming the line", bad)
				}
			}()
			HostPackages(bad)
		})
	}
}

// TestPackagesList checks the built-in list: Debian package names, each once, and the
// packages the host runs required.
func TestPackagesList(t *testing.T) {
	name := regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
	seen := map[string]bool{}
	for _, p := range append(DefaultPackages(), DefaultOptionalPackages()...) {
		if !name.MatchString(p) {
			t.Errorf("packages.txt: %q is not a Debian package name", p)
		}
		if seen[p] {
			t.Errorf("packages.txt: %q listed twice", p)
		}
		seen[p] = true
	}
	for _, p := range []string{"containerd", "runc", "openvswitch-switch", "libvirt-daemon-system", "qemu-system-x86"} {
		if !contains(DefaultPackages(), p) {
			t.Errorf("DefaultPackages() = %v, want it to hold %s", DefaultPackages(), p)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
