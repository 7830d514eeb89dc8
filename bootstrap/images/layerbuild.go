package images

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/osdcloud/osd/bootstrap/images/oci"
)

// layerBuild makes the top layer of one Debian image in work: a root image's whole
// tree with mmdebstrap (work/rootfs), or, for an image layered on others, its packages
// installed with apt in a chroot of an overlay mount whose lower directories are the
// kept trees of the images below (work/rootfs) and whose upper directory (work/upper)
// is then exactly what this image adds: its layer.
type layerBuild struct {
	b       *Builder
	ch      []Recipe // the recipes below, then this image's
	work    string
	debs    string // this build's .debs (hard links into the shared cache)
	total   int    // packages this layer installs
	started time.Time
	// layerFile is where the packed layer goes (outside work, which is removed).
	layerFile string
	layered   bool
	mounts    []string // mounted, in order
}

func (lb *layerBuild) recipe() Recipe { return lb.ch[len(lb.ch)-1] }
func (lb *layerBuild) rootfs() string { return filepath.Join(lb.work, "rootfs") }
func (lb *layerBuild) pkgList() string {
	return filepath.Join(lb.work, "packages.txt")
}

// tree is the directory that holds this layer's contents once built.
func (lb *layerBuild) tree() string {
	if lb.layered {
		return filepath.Join(lb.work, "upper")
	}
	return lb.rootfs()
}

// root builds a root image with mmdebstrap.
func (lb *layerBuild) root(ctx context.Context) error {
	return lb.b.mmdebstrap(ctx, lb.recipe(), lb.work, lb.rootfs(), lb.debs, lb.total)
}

// onBase installs the recipe's packages in a chroot of an overlay of the kept trees of
// the layers below.
func (lb *layerBuild) onBase(ctx context.Context) error {
	lb.layered = true
	r := lb.recipe()
	var lowers []string // top-most first, as overlayfs wants them
	for i := len(lb.ch) - 2; i >= 0; i-- {
		t, err := lb.b.ensureTree(lb.ch[i].Name)
		if err != nil {
			return err
		}
		lowers = append(lowers, t)
	}
	upper, ovl, root := filepath.Join(lb.work, "upper"), filepath.Join(lb.work, "ovl"), lb.rootfs()
	for _, d := range []string{upper, ovl, root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s,redirect_dir=off,metacopy=off,index=off", strings.Join(lowers, ":"), upper, ovl)
	if err := lb.mount("overlay", root, "overlay", 0, opts); err != nil {
		return err
	}
	if err := lb.prepareChroot(); err != nil {
		return err
	}
	host, err := os.Hostname()
	if err != nil {
		return err
	}
	hook := filepath.Join(lb.work, "accounts.sh")
	if err := os.WriteFile(hook, []byte(essentialHook(r, host)), 0o755); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "/bin/sh", hook, root).CombinedOutput(); err != nil {
		return fmt.Errorf("accounts and debconf: %w: %s", err, lastLines(string(out), 5))
	}
	lb.b.emit(Event{Image: r.Name, Step: "install", Total: lb.total, Message: "apt-get install on " + r.Base})
	// dpkg need not sync each file it unpacks: an interrupted build is thrown away whole.
	args := append([]string{root, "apt-get", "-y", "-q", "-o", "APT::Sandbox::User=root", "-o", "Dpkg::Use-Pty=false",
		"-o", "APT::Install-Recommends=false", "-o", "Dpkg::Options::=--force-unsafe-io", "install"}, r.Packages...)
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	env := []string{"LC_ALL=C.UTF-8", "HOME=/root", "DEBIAN_FRONTEND=noninteractive", "DEBCONF_NONINTERACTIVE_SEEN=true"}
	deferCompile := false
	if _, err := os.Stat(filepath.Join(root, "usr/bin/py3compile")); err == nil {
		shim, err := installPyCompileShim(root)
		if err != nil {
			return err
		}
		deferCompile = true
		path = shim + ":" + path
	}
	// apt runs dpkg, and so the maintainer scripts, with DPkg::Path for PATH.
	args = append(args[:2], append([]string{"-o", "DPkg::Path=" + path}, args[2:]...)...)
	cmd := exec.CommandContext(ctx, "chroot", args...)
	cmd.Env = append([]string{"PATH=" + path}, env...)
	if err := lb.b.runLogged(r.Name, lb.total, cmd); err != nil {
		return fmt.Errorf("apt-get install: %w", err)
	}
	if !deferCompile {
		return nil
	}
	lb.b.emit(Event{Image: r.Name, Step: "install", Packages: lb.total, Total: lb.total, Message: "byte-compiling Python modules"})
	n, err := runPyCompile(ctx, root, append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, env...))
	lb.b.logger().Debug("py3compile", "image", r.Name, "calls", n)
	return err
}

// prepareChroot mounts what package scripts need (/proc, /sys, /dev), the resolution's
// package lists (read-only) and this build's .debs, and keeps services from starting
// (policy-rc.d exits 101). Everything it adds is excluded from the layer.
func (lb *layerBuild) prepareChroot() error {
	root := lb.rootfs()
	apt, err := lb.b.aptDir(lb.recipe().Suite)
	if err != nil {
		return err
	}
	for _, d := range []string{"proc", "sys", "dev", "var/lib/apt/lists", "var/cache/apt/archives", "usr/sbin", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	steps := []struct {
		src, dst, fstype string
		flags            uintptr
	}{
		{"proc", "proc", "proc", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
		{"sysfs", "sys", "sysfs", unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
		{"/dev", "dev", "", unix.MS_BIND | unix.MS_REC},
		{filepath.Join(apt.Dir, "lists"), "var/lib/apt/lists", "", unix.MS_BIND},
		{lb.debs, "var/cache/apt/archives", "", unix.MS_BIND},
	}
	for _, s := range steps {
		if err := lb.mount(s.src, filepath.Join(root, s.dst), s.fstype, s.flags, ""); err != nil {
			return err
		}
	}
	if err := unix.Mount("", filepath.Join(root, "var/lib/apt/lists"), "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		return fmt.Errorf("read-only package lists: %w", err)
	}
	if err := os.WriteFile(filepath.Join(root, "usr/sbin/policy-rc.d"), []byte("#!/bin/sh\nexit 101\n"), 0o755); err != nil {
		return err
	}
	resolv, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(root, "etc/resolv.conf"), resolv, 0o644)
}

func (lb *layerBuild) mount(src, dst, fstype string, flags uintptr, data string) error {
	if err := unix.Mount(src, dst, fstype, flags, data); err != nil {
		return fmt.Errorf("mount %s on %s: %w", src, dst, err)
	}
	lb.mounts = append(lb.mounts, dst)
	return nil
}

// unmountAll detaches what onBase mounted, last first.
func (lb *layerBuild) unmountAll() error {
	for i := len(lb.mounts) - 1; i >= 0; i-- {
		if err := unix.Unmount(lb.mounts[i], unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount %s: %w", lb.mounts[i], err)
		}
	}
	lb.mounts = nil
	return nil
}

// customize adds the recipe's files, records the installed packages, checks that no
// service was started, resets /etc/hosts, and leaves the layer's tree with nothing
// the image must not hold (excluded paths are removed from it).
func (lb *layerBuild) customize() error {
	r := lb.recipe()
	root := lb.rootfs()
	if err := writeFiles(root, r.Files); err != nil {
		return err
	}
	if lb.layered {
		hook := filepath.Join(lb.work, "customize.sh")
		if err := os.WriteFile(hook, []byte(customizeHook(lb.pkgList())), 0o755); err != nil {
			return err
		}
		if out, err := exec.Command("/bin/sh", hook, root).CombinedOutput(); err != nil {
			return fmt.Errorf("customize: %w: %s", err, lastLines(string(out), 5))
		}
		if err := lb.unmountAll(); err != nil {
			return err
		}
	}
	return pruneTree(lb.tree(), chainExcludes(lb.ch))
}

// pack packs the layer's tree into the build's layer file.
func (lb *layerBuild) pack() (v1.Layer, error) {
	r := lb.recipe()
	lb.b.emit(Event{Image: r.Name, Step: "pack", Message: "packing " + map[bool]string{true: "the layer", false: "the root filesystem"}[lb.layered]})
	return oci.LayerFromDir(lb.tree(), oci.DirOptions{
		Exclude:          chainExcludes(lb.ch),
		KeepMtimesBefore: lb.started.Add(-time.Second),
		LayerFile:        lb.layerFile,
		Overlay:          lb.layered,
		Progress: func(n int, bytes int64) {
			lb.b.emit(Event{Image: r.Name, Step: "pack", MB: float64(bytes) / 1e6, Message: fmt.Sprintf("%d entries", n)})
		},
	})
}
