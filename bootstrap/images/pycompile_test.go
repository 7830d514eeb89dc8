package images

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParsePyCompileCalls(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       [][]string
		err        bool
	}{
		{"none", "", nil, false},
		{"one package", "-p\x1fpython3-nova\x1f\n", [][]string{{"-p", "python3-nova"}}, false},
		{"private directory, repeat dropped", "-p\x1fopenstack-dashboard\x1f/usr/share/openstack-dashboard\x1f\n-p\x1fpython3-six\x1f\n-p\x1fpython3-six\x1f\n",
			[][]string{{"-p", "openstack-dashboard", "/usr/share/openstack-dashboard"}, {"-p", "python3-six"}}, false},
		{"argument with spaces kept whole", "-X\x1f^/usr/a b\x1f\n", [][]string{{"-X", "^/usr/a b"}}, false},
		{"cut short", "-p\x1fpython3-six\x1f\n-p\x1fpyth", nil, true},
	} {
		got, err := parsePyCompileCalls(tc.data)
		if (err != nil) != tc.err || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: parsePyCompileCalls() = %q, %v; want %q, error %v", tc.name, got, err, tc.want, tc.err)
		}
	}
}

// TestPyCompileShim runs the stand-in with /bin/sh as maintainer scripts do and reads
// back its record.
func TestPyCompileShim(t *testing.T) {
	root := t.TempDir()
	dir, err := installPyCompileShim(root)
	if err != nil {
		t.Fatal(err)
	}
	shim := filepath.Join(root, dir, "py3compile")
	// The stand-in writes to its absolute path in the chroot: run it with that path
	// rewritten to the test's root.
	body, _ := os.ReadFile(shim)
	local := strings.ReplaceAll(string(body), "/"+pyCompileDir, filepath.Join(root, pyCompileDir))
	if err := os.WriteFile(shim, []byte(local), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"-p", "python3-nova"}, {"-p", "openstack-dashboard", "/usr/share/openstack-dashboard"}, {"-X", "a b", "-p", "x"}} {
		if out, err := exec.Command("/bin/sh", append([]string{shim}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("shim %v: %v: %s", args, err, out)
		}
	}
	data, err := os.ReadFile(filepath.Join(root, pyCompileDir, "py3compile.calls"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := parsePyCompileCalls(string(data))
	want := [][]string{{"-p", "python3-nova"}, {"-p", "openstack-dashboard", "/usr/share/openstack-dashboard"}, {"-X", "a b", "-p", "x"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("recorded calls = %q, %v; want %q", got, err, want)
	}
}
