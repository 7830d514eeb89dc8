package guest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// unpackInitrd unpacks the image's initramfs into a fresh directory (GNU cpio, as root:
// device nodes and owners as the kernel makes them).
func unpackInitrd(t *testing.T, initrd string) string {
	t.Helper()
	dir := t.TempDir()
	// lz4's own decompressor: pierrec/lz4 (v2) refuses some of the blocks its compressor
	// makes of the real archive, which lz4 and the kernel read.
	cmd := exec.Command("sh", "-c", "lz4 -dc \"$1\" | cpio -idm --quiet", "sh", initrd)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("unpack %s: %v: %s", initrd, err, out)
	}
	return dir
}

// chrootRun runs args inside root as user uid:gid (0:0 for root), with /proc mounted in a
// mount namespace of its own (start-stop-daemon reads /proc), and returns the output.
func chrootRun(root string, uid int, args ...string) (string, error) {
	script := `mount -t proc proc "$1/proc" && r="$1" && u="$2" && shift 2 && exec chroot --userspec="$u" "$r" "$@"`
	argv := append([]string{"-m", "sh", "-c", script, "sh", root, fmt.Sprintf("%d:%d", uid, uid)}, args...)
	out, err := exec.Command("unshare", argv...).CombinedOutput()
	return string(out), err
}

// TestGuestTools builds the guest image and checks, in a chroot of its unpacked initramfs,
// that it carries what CirrOS carries for test suites: curl (its shared libraries
// resolved: it runs and fetches from a local HTTP server), mkfs.ext4 and blkid (an ext4
// file system made and recognised), busybox's ip, ping, nc, wget, ifconfig, hostname and
// mount, and a sudo that makes the login user root (and nobody else).
func TestGuestTools(t *testing.T) {
	need(t, "apt-get", "dpkg-deb", "depmod", "cpio", "lz4", "unshare", "chroot")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	img, err := Build(ctx, Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	st, _ := os.Stat(img.Initrd)
	t.Logf("initrd %s: %.1f MB", img.Initrd, float64(st.Size())/1e6)
	root := unpackInitrd(t, img.Initrd)
	for _, p := range []string{"usr/bin/curl", "sbin/mke2fs", "sbin/mkfs.ext4", "sbin/blkid", "usr/bin/sudo", "usr/libexec/osd-asroot"} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("initramfs lacks /%s: %v", p, err)
		}
	}
	if st, err := os.Stat(filepath.Join(root, "tmp")); err != nil || st.Mode()&os.ModePerm != 0o777 || st.Mode()&os.ModeSticky == 0 {
		t.Errorf("initramfs /tmp = %v, %v; want mode 1777 (the login user writes there)", st.Mode(), err)
	}
	// busybox's applets, as init links them (at their usual places)
	out, err := chrootRun(root, 0, "/bin/busybox", "--list-full")
	if err != nil {
		t.Fatalf("busybox --list-full: %v: %s", err, out)
	}
	for _, a := range []string{"sbin/ip", "bin/ping", "usr/bin/nc", "usr/bin/wget", "sbin/ifconfig", "bin/hostname", "bin/mount"} {
		if !strings.Contains("\n"+out, "\n"+a+"\n") {
			t.Errorf("busybox --list-full lacks %s (it lists %s)", a, strings.Join(strings.Fields(out), " "))
		}
	}

	// curl runs (every library it loads is in the image) and fetches over HTTP.
	if out, err := chrootRun(root, 1000, "/usr/bin/curl", "--version"); err != nil || !strings.HasPrefix(out, "curl ") {
		t.Fatalf("curl --version in the guest's root = %v:\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "uuid-for-%s", r.URL.Path) })}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/latest/meta-data/instance-id"
	if out, err := chrootRun(root, 1000, "/usr/bin/curl", "-sS", url); err != nil || out != "uuid-for-/latest/meta-data/instance-id" {
		t.Errorf("curl %s in the guest's root = %q, %v", url, out, err)
	}

	// mkfs.ext4 and blkid on a file, as a volume check does on a disk.
	vol := filepath.Join(root, "tmp", "vol")
	if err := os.WriteFile(vol, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(vol, 16<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := chrootRun(root, 0, "/sbin/mkfs.ext4", "-F", "-q", "/tmp/vol"); err != nil {
		t.Errorf("mkfs.ext4 in the guest's root = %v:\n%s", err, out)
	}
	if out, err := chrootRun(root, 0, "/sbin/blkid", "/tmp/vol"); err != nil || !strings.Contains(out, `TYPE="ext4"`) {
		t.Errorf("blkid /tmp/vol in the guest's root = %v: %q, want TYPE=\"ext4\"", err, out)
	}

	// sudo: root for the login user (uid 1000), refused to anyone else.
	if out, err := chrootRun(root, 1000, "/usr/bin/sudo", "/bin/busybox", "id"); err != nil || !strings.HasPrefix(out, "uid=0(root) gid=0(root)") {
		t.Errorf("sudo id as %s = %v: %q, want uid=0(root) gid=0(root)", LoginUser, err, out)
	}
	if out, err := chrootRun(root, 1000, "/usr/bin/sudo", "-n", "/bin/sh", "-c", "exit 3"); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("sudo -n sh -c 'exit 3' = %v: %q, want exit status 3 (the command's)", err, out)
	}
	if out, err := chrootRun(root, 1001, "/usr/bin/sudo", "/bin/busybox", "id"); err == nil || strings.Contains(out, "uid=0") {
		t.Errorf("sudo id as uid 1001 = %v: %q, want refused", err, out)
	}
}
