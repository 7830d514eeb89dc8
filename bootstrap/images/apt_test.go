package images

import (
	"os"
	"path/filepath"
	"testing"
	"time"
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

// TestListsIndex: the resolutions' memo key changes with a package index, not with the
// freshness stamp or a re-signed Release file.
func TestListsIndex(t *testing.T) {
	a := AptDir{Dir: t.TempDir()}
	lists := filepath.Join(a.Dir, "lists")
	if err := os.MkdirAll(filepath.Join(lists, "partial"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := a.listsIndex(); err == nil {
		t.Fatal("listsIndex of lists without a package index: no error")
	}
	write := func(name, data string, mtime time.Time) {
		t.Helper()
		p := filepath.Join(lists, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Date(2026, 11, 28, 10, 42, 33, 0, time.UTC)
	write("deb.debian.org_debian_dists_bookworm_InRelease", "signed 1", t0)
	write("deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages.lz4", "packages 1", t0)
	write("deb.debian.org_debian-security_dists_bookworm-security_main_binary-amd64_Packages.lz4", "security 1", t0)
	index := func() string {
		t.Helper()
		s, err := a.listsIndex()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	first := index()

	// A refresh that fetched nothing new: the stamp and the Release file change.
	if err := os.WriteFile(filepath.Join(a.Dir, "updated"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	write("deb.debian.org_debian_dists_bookworm_InRelease", "signed 2, later", t0.Add(time.Hour))
	if got := index(); got != first {
		t.Errorf("index changed with the stamp and a re-signed Release file only")
	}
	// A new security index.
	write("deb.debian.org_debian-security_dists_bookworm-security_main_binary-amd64_Packages.lz4", "security 2", t0.Add(2*time.Hour))
	second := index()
	if second == first {
		t.Errorf("index unchanged after a package index changed")
	}
	// The same size, a later time.
	write("deb.debian.org_debian-security_dists_bookworm-security_main_binary-amd64_Packages.lz4", "security 3", t0.Add(3*time.Hour))
	if got := index(); got == second {
		t.Errorf("index unchanged after a package index of the same size was fetched again")
	}
}
