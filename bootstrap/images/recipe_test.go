package images

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/osdcloud/osd/bootstrap/images/oci"
)

func TestCatalog(t *testing.T) {
	want := []string{"pause", "coredns", "base", "openstack-common", "openstack", "compute", "ceph", "ovn", "mariadb", "rabbitmq", "memcached"}
	var got []string
	refs := map[string]bool{}
	for _, r := range Recipes() {
		got = append(got, r.Name)
		if err := r.Validate(); err != nil {
			t.Errorf("Recipes() %s: Validate() = %v", r.Name, err)
		}
		if refs[r.Ref] {
			t.Errorf("Recipes() ref %s used twice", r.Ref)
		}
		refs[r.Ref] = true
		if _, err := oci.FullRef(r.Ref); err != nil {
			t.Errorf("Recipes() %s ref %q: %v", r.Name, r.Ref, err)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Recipes() names = %v, want %v", got, want)
	}
	// Every Debian image is layered on base, the OpenStack ones through openstack-common,
	// and comes after its base in build order.
	seen := map[string]bool{}
	for _, r := range Recipes() {
		seen[r.Name] = true
		ch, err := chain(Recipes(), r)
		if err != nil {
			t.Errorf("chain(%s) = %v", r.Name, err)
			continue
		}
		if r.Kind == KindDebian && ch[0].Name != BaseImage {
			t.Errorf("chain(%s) starts at %s, want %s", r.Name, ch[0].Name, BaseImage)
		}
		if r.Base != "" && !seen[r.Base] {
			t.Errorf("Recipes(): %s comes before its base %s", r.Name, r.Base)
		}
		if strings.Contains(r.Ref, "2023.1") || (r.Name == "openstack" && !strings.HasSuffix(r.Ref, ":zed-bookworm")) {
			t.Errorf("Recipes() %s ref %s, want the release bookworm ships (zed)", r.Name, r.Ref)
		}
	}
	for _, name := range []string{"openstack", "compute"} {
		if r, _ := RecipeByName(name); r.Base != CommonImage {
			t.Errorf("%s is layered on %q, want %s", name, r.Base, CommonImage)
		}
	}
	os, _ := RecipeByName("openstack")
	uids := map[string]int{}
	for _, u := range os.Users {
		uids[u.Name] = u.UID
	}
	for name, uid := range map[string]int{"nova": 64060, "cinder": 64061, "glance": 64062} {
		if uids[name] != uid {
			t.Errorf("openstack recipe user %s UID = %d, want %d (Debian's reservation)", name, uids[name], uid)
		}
	}
	for _, p := range []string{"keystone", "glance-api", "placement-api", "nova-api", "nova-conductor", "nova-scheduler", "nova-consoleproxy",
		"neutron-server", "neutron-ovn-metadata-agent", "cinder-api", "cinder-scheduler", "cinder-volume", "heat-api", "heat-engine",
		"openstack-dashboard", "python3-openstackclient", "python3-osc-placement", "python3-pymysql", "python3-memcache"} {
		found := false
		for _, q := range os.Packages {
			found = found || q == p
		}
		if !found {
			t.Errorf("openstack recipe lacks package %s", p)
		}
	}
}

func TestRecipeHash(t *testing.T) {
	r, _ := RecipeByName("memcached")
	h := r.Hash()
	reordered := r
	reordered.Packages = []string{"b", "a"}
	r2 := r
	r2.Packages = []string{"a", "b"}
	if reordered.Hash() != r2.Hash() {
		t.Errorf("Hash() depends on package order")
	}
	changed := r
	changed.Debconf = []string{"x y/z boolean true"}
	if changed.Hash() == h {
		t.Errorf("Hash() unchanged after a debconf change")
	}
	if r.Hash() != h || len(h) != 64 {
		t.Errorf("Hash() = %q not stable or not sha256 hex", h)
	}
}

func TestRecipeValidate(t *testing.T) {
	base := Recipe{Name: "x", Ref: "localhost/osd/x:1", Kind: KindDebian, Suite: "bookworm", Packages: []string{"a"}}
	tests := []struct {
		name   string
		mutate func(*Recipe)
		ok     bool
	}{
		{"valid", func(*Recipe) {}, true},
		{"no ref", func(r *Recipe) { r.Ref = "" }, false},
		{"no packages", func(r *Recipe) { r.Packages = nil }, false},
		{"unknown kind", func(r *Recipe) { r.Kind = "docker" }, false},
		{"duplicate uid", func(r *Recipe) {
			r.Users = []User{{Name: "a", UID: 900, GID: 900}, {Name: "b", UID: 900, GID: 901}}
		}, false},
		{"gid clash with group", func(r *Recipe) {
			r.Groups = []Group{{Name: "kvm", GID: 900}}
			r.Users = []User{{Name: "a", UID: 900, GID: 900}}
		}, false},
		{"unknown supplementary group", func(r *Recipe) {
			r.Users = []User{{Name: "a", UID: 900, GID: 900, Groups: []string{"kvm"}}}
		}, false},
		{"go without module", func(r *Recipe) { r.Kind = KindGo }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := base
			tc.mutate(&r)
			if err := r.Validate(); (err == nil) != tc.ok {
				t.Errorf("Validate() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestAccountLines(t *testing.T) {
	r, _ := RecipeByName("compute")
	groups, passwd := accountLines(r)
	wantGroups := []string{"libvirt-qemu:x:920:", "kvm:x:921:nova,libvirt-qemu", "libvirt:x:922:nova", "libvirt-dnsmasq:x:923:", "nova:x:64060:"}
	if !reflect.DeepEqual(groups, wantGroups) {
		t.Errorf("accountLines(compute) groups = %q, want %q", groups, wantGroups)
	}
	wantPasswd := []string{"nova:x:64060:64060::/var/lib/nova:/bin/sh", "libvirt-qemu:x:920:920::/var/lib/libvirt:/usr/sbin/nologin", "libvirt-dnsmasq:x:923:923::/var/lib/libvirt/dnsmasq:/usr/sbin/nologin"}
	if !reflect.DeepEqual(passwd, wantPasswd) {
		t.Errorf("accountLines(compute) passwd = %q, want %q", passwd, wantPasswd)
	}
}

// TestEssentialHook runs the generated hook against a fake root with
// base-passwd-like files (no chroot needed: the recipe has no debconf).
func TestEssentialHook(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Fatalf("sh is not installed: %v", err)
	}
	root := t.TempDir()
	etc := filepath.Join(root, "etc")
	os.MkdirAll(etc, 0o755)
	os.WriteFile(filepath.Join(etc, "passwd"), []byte("root:x:0:0:root:/root:/bin/bash\n"), 0o644)
	// kvm made by a lower layer (with a member of its own): the hook adds nova to it.
	os.WriteFile(filepath.Join(etc, "group"), []byte("root:x:0:\nkvm:x:921:qemu\n"), 0o644)
	r := Recipe{Name: "t", Groups: []Group{{Name: "kvm", GID: 921}}, Users: []User{{Name: "nova", UID: 64060, GID: 64060, Home: "/var/lib/nova", Shell: "/bin/sh", Groups: []string{"kvm"}}}}
	hook := filepath.Join(t.TempDir(), "hook.sh")
	os.WriteFile(hook, []byte(essentialHook(r, "node1")), 0o755)
	if out, err := exec.Command(hook, root).CombinedOutput(); err != nil {
		t.Fatalf("essential hook: %v: %s", err, out)
	}
	passwd, _ := os.ReadFile(filepath.Join(etc, "passwd"))
	group, _ := os.ReadFile(filepath.Join(etc, "group"))
	hosts, _ := os.ReadFile(filepath.Join(etc, "hosts"))
	if !strings.Contains(string(passwd), "nova:x:64060:64060::/var/lib/nova:/bin/sh\n") {
		t.Errorf("passwd = %q, want the nova line", passwd)
	}
	if !strings.Contains(string(group), "nova:x:64060:\n") || !strings.Contains(string(group), "kvm:x:921:qemu,nova\n") || strings.Count(string(group), "kvm:") != 1 {
		t.Errorf("group = %q, want nova added, and kvm once with its member and nova", group)
	}
	// Run again (the same layer built twice): nothing more.
	if out, err := exec.Command(hook, root).CombinedOutput(); err != nil {
		t.Fatalf("essential hook again: %v: %s", err, out)
	}
	if again, _ := os.ReadFile(filepath.Join(etc, "group")); string(again) != string(group) {
		t.Errorf("group after a second run = %q, want %q", again, group)
	}
	if !strings.Contains(string(hosts), "127.0.1.1\tnode1") {
		t.Errorf("hosts = %q, want the build host resolvable", hosts)
	}
	if _, err := os.Stat(filepath.Join(etc, "shadow")); err == nil {
		t.Errorf("hook created /etc/shadow; it must only append to an existing one")
	}
	// A clashing existing GID fails the build.
	os.WriteFile(filepath.Join(etc, "group"), []byte("kvm:x:36:\n"), 0o644)
	if out, err := exec.Command(hook, root).CombinedOutput(); err == nil || !strings.Contains(string(out), "kvm exists with id 36") {
		t.Errorf("hook with kvm at GID 36 = %v %s, want failure naming the clash", err, out)
	}
}

func TestMmdebstrapArgs(t *testing.T) {
	r, _ := RecipeByName("memcached")
	args := MmdebstrapArgs(r, []AptSource{{URI: "http://m/debian", Suite: "bookworm", Components: []string{"main"}}}, "/w/rootfs", "/c/debs", "/w/ess.sh", "/w/cus.sh")
	joined := strings.Join(args, "\n")
	for _, want := range []string{"--mode=root", "--variant=minbase", "--include=memcached", "--essential-hook=/w/ess.sh",
		"--customize-hook=/w/cus.sh", "--setup-hook=sync-in /c/debs /var/cache/apt/archives/", "--skip=essential/unlink",
		"--customize-hook=sync-out /var/cache/apt/archives /c/debs", "--dpkgopt=force-unsafe-io"} {
		if !strings.Contains(joined, want) {
			t.Errorf("MmdebstrapArgs() lacks %q", want)
		}
	}
	n := len(args)
	if args[n-3] != "bookworm" || args[n-2] != "/w/rootfs" || args[n-1] != "deb http://m/debian bookworm main" {
		t.Errorf("MmdebstrapArgs() tail = %q, want suite, target, source line", args[n-3:])
	}
}

func TestParseAptURIs(t *testing.T) {
	out := `Reading package lists...
'http://deb.debian.org/debian/pool/main/g/gcc-12/gcc-12-base_12.2.0-14%2bdeb12u1_amd64.deb' gcc-12-base_12.2.0-14+deb12u1_amd64.deb 37596 MD5Sum:8e7e741807b1e1939df8f58323affdcb
'http://deb.debian.org/debian/pool/main/a/audit/libaudit-common_3.0.9-1_all.deb' libaudit-common_1%3a3.0.9-1_all.deb 10448 MD5Sum:c1f13138b89bb7eb29ee6cf93ccca204
'http://deb.debian.org/debian-security/pool/updates/main/t/tzdata/tzdata_2026f-0%2bdeb12u1_all.deb' tzdata_2026f-0+deb12u1_all.deb 256456
`
	got, err := ParseAptURIs(out)
	want := map[string]string{"gcc-12-base": "12.2.0-14+deb12u1", "libaudit-common": "1:3.0.9-1", "tzdata": "2026f-0+deb12u1"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ParseAptURIs() = %v, %v; want %v", got, err, want)
	}
	if l := versionLines(want); l != "gcc-12-base=12.2.0-14+deb12u1\nlibaudit-common=1:3.0.9-1\ntzdata=2026f-0+deb12u1" {
		t.Errorf("versionLines() = %q", l)
	}
	for _, bad := range []string{"'http://m/x.deb' x_1.0.deb 1 SHA256:00", "'http://m/x.deb' x_1%zz_all.deb 1 SHA256:00", "'http://m/x.deb' _1.0_all.deb 1 SHA256:00",
		"'http://m/x.deb' x_1%2f..%2f..%2fetc_all.deb 1 SHA256:00", "'http://m/x.deb' x_1%20a_all.deb 1 SHA256:00", "'http://m/x.deb' X_1.0_all.deb 1 SHA256:00"} {
		if v, err := ParseAptURIs(bad); err == nil {
			t.Errorf("ParseAptURIs(%q) = %v, want an error", bad, v)
		}
	}
}

func TestStaleDebs(t *testing.T) {
	files := []string{"libc6_2.36-9+deb12u14_amd64.deb", "libc6_2.36-9+deb12u10_amd64.deb", "bash_5.2.15-2+b7_amd64.deb",
		"cinder-common_2%3a21.3.1-1~deb12u1_all.deb", "cinder-common_2%3a21.3.0-1_all.deb", "other_1.0_all.deb", "lock"}
	want := map[string]string{"libc6": "2.36-9+deb12u14", "bash": "5.2.15-2+b7", "cinder-common": "2:21.3.1-1~deb12u1"}
	got := staleDebs(files, want)
	exp := []string{"cinder-common_2%3a21.3.0-1_all.deb", "libc6_2.36-9+deb12u10_amd64.deb"}
	if !reflect.DeepEqual(got, exp) {
		t.Errorf("staleDebs() = %v, want %v (other versions of wanted packages only)", got, exp)
	}
}

func TestMissingDebs(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"libc6_2.36-9+deb12u14_amd64.deb", "cinder-common_2%3a21.3.1-1~deb12u1_all.deb"} {
		os.WriteFile(filepath.Join(dir, f), nil, 0o644)
	}
	got := missingDebs(dir, map[string]string{"libc6": "2.36-9+deb12u14", "cinder-common": "2:21.3.1-1~deb12u1", "bash": "5.2.15-2+b7", "libc-bin": "2.36-9+deb12u14"})
	if want := []string{"bash=5.2.15-2+b7", "libc-bin=2.36-9+deb12u14"}; !reflect.DeepEqual(got, want) {
		t.Errorf("missingDebs() = %v, want %v", got, want)
	}
}

func TestFullRef(t *testing.T) {
	tests := map[string]string{
		PauseRef:                               "docker.io/rancher/mirrored-pause:3.6",
		"rancher/mirrored-pause:3.6":           "docker.io/rancher/mirrored-pause:3.6",
		"busybox":                              "docker.io/library/busybox:latest",
		"localhost/osd/openstack:zed-bookworm": "localhost/osd/openstack:zed-bookworm",
		"registry.local:5000/a/b:c":            "registry.local:5000/a/b:c",
	}
	for in, want := range tests {
		if got, err := oci.FullRef(in); err != nil || got != want {
			t.Errorf("oci.FullRef(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := oci.FullRef("UPPER/case"); err == nil {
		t.Errorf("oci.FullRef(UPPER/case) = nil error, want an error")
	}
}
