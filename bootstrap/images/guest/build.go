package guest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/osdcloud/osd/bootstrap/images"
)

// Packages are what the guest image is made of: the cloud kernel (a
// meta-package naming the current linux-image-*-cloud-amd64) and busybox; the SSH
// server (SSHPackages) and the tools (ToolPackages) with their libraries come on top.
var Packages = []string{"linux-image-cloud-amd64", "busybox-static"}

// Options say where to cache and which mirror to use.
type Options struct {
	CacheDir string             // default /var/cache/osd; the image lives under CacheDir/guest
	Suite    string             // default bookworm
	Sources  []images.AptSource // default the host's apt sources for Suite
	// ListsMaxAge is how old the package lists may be before apt-get update (default 24 h).
	ListsMaxAge time.Duration
	Log         *slog.Logger
}

// Image is a built (or cached) kernel + initramfs pair.
type Image struct {
	Kernel        string            `json:"kernel"` // path of vmlinuz
	Initrd        string            `json:"initrd"` // path of the LZ4 (legacy format) newc initramfs
	Key           string            `json:"key"`    // cache key: packages and recipe
	KernelVersion string            `json:"kernel_version"`
	Packages      map[string]string `json:"packages"` // name -> version used
	Modules       []string          `json:"modules"`  // module load order
	Cached        bool              `json:"cached"`
}

var buildMu sync.Mutex // one build at a time per process

// Build returns the guest image for the packages the mirror offers now,
// building it unless the cache holds it.
func Build(ctx context.Context, o Options) (Image, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	if o.CacheDir == "" {
		o.CacheDir = "/var/cache/osd"
	}
	if o.Suite == "" {
		o.Suite = "bookworm"
	}
	if o.ListsMaxAge == 0 {
		o.ListsMaxAge = 24 * time.Hour
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if len(o.Sources) == 0 {
		srcs, err := images.HostSources(o.Suite)
		if err != nil {
			return Image{}, fmt.Errorf("guest image: %w", err)
		}
		o.Sources = srcs
	}
	root := filepath.Join(o.CacheDir, "guest")
	apt := images.AptDir{Dir: filepath.Join(root, "apt"), Sources: o.Sources, MaxAge: o.ListsMaxAge}
	closure, err := apt.Resolve(ctx, nil, Packages)
	if err != nil {
		// Offline (mirror unreachable): the newest image built before still boots.
		if img, ok := newestCached(root); ok {
			o.Log.Warn("guest image: cannot resolve packages, using the newest cached image", "err", err, "kernel", img.KernelVersion)
			img.Cached = true
			return img, nil
		}
		return Image{}, fmt.Errorf("guest image: resolve packages: %w", err)
	}
	want, err := selectPackages(closure)
	if err != nil {
		return Image{}, fmt.Errorf("guest image: %w", err)
	}
	// The SSH server and the tools with their dependency closure (the libraries their
	// binaries load).
	extra := append(append([]string(nil), SSHPackages...), ToolPackages...)
	extraClosure, err := apt.Resolve(ctx, nil, extra)
	if err != nil {
		return Image{}, fmt.Errorf("guest image: resolve %s: %w", strings.Join(extra, " "), err)
	}
	for n, v := range extraClosure {
		want[n] = v
	}
	key := CacheKey(want)
	dir := filepath.Join(root, key[:16])
	if img, err := readManifest(dir); err == nil && img.Key == key {
		img.Cached = true
		return img, nil
	}
	o.Log.Info("building guest image", "packages", want)
	debs, err := apt.Download(ctx, filepath.Join(root, "debs"), want)
	if err != nil {
		return Image{}, fmt.Errorf("guest image: download packages: %w", err)
	}
	img, err := assemble(ctx, root, dir, key, want, debs)
	if err != nil {
		return Image{}, fmt.Errorf("guest image: %w", err)
	}
	pruneDebs(filepath.Join(root, "debs"), debs)
	return img, nil
}

// newestCached is the most recently built image under root, if any.
func newestCached(root string) (Image, bool) {
	ms, _ := filepath.Glob(filepath.Join(root, "*", "manifest.json"))
	var best Image
	var bestTime time.Time
	for _, m := range ms {
		st, err := os.Stat(m)
		if err != nil {
			continue
		}
		img, err := readManifest(filepath.Dir(m))
		if err == nil && st.ModTime().After(bestTime) {
			best, bestTime = img, st.ModTime()
		}
	}
	return best, !bestTime.IsZero()
}

// selectPackages picks, from the resolved closure, the kernel package the
// meta-package depends on and busybox-static.
func selectPackages(closure map[string]string) (map[string]string, error) {
	want := map[string]string{}
	var kernels []string
	for name, ver := range closure {
		if isCloudKernel(name) {
			kernels = append(kernels, name)
			want[name] = ver
		}
	}
	if len(kernels) != 1 {
		sort.Strings(kernels)
		return nil, fmt.Errorf("want one cloud kernel package in the closure of %s, found %v", Packages[0], kernels)
	}
	bb, ok := closure["busybox-static"]
	if !ok {
		return nil, fmt.Errorf("busybox-static not resolved")
	}
	want["busybox-static"] = bb
	return want, nil
}

// isCloudKernel says whether a package is a cloud kernel (not its meta-package).
func isCloudKernel(name string) bool {
	return strings.HasPrefix(name, "linux-image-") && strings.HasSuffix(name, "-cloud-amd64") && name != "linux-image-cloud-amd64"
}

// binaries are the dynamically linked programs the guest carries.
func binaries() []string { return append(append([]string(nil), SSHBinaries...), ToolBinaries...) }

// keepFile selects, from the SSH server's and the tools' packages, their binaries and
// what lives in the library directories (the dynamic loader's link in lib64 included).
func keepFile(p string) bool {
	for _, b := range binaries() {
		if p == b {
			return true
		}
	}
	if strings.HasPrefix(p, "lib64/") {
		return true
	}
	for _, d := range libDirs[:2] {
		if strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// CacheKey is the key of the image made from these package versions with
// this package's initramfs recipe.
func CacheKey(pkgs map[string]string) string {
	lines := make([]string, 0, len(pkgs))
	for n, v := range pkgs {
		lines = append(lines, n+"="+v)
	}
	sort.Strings(lines)
	sum := sha256.Sum256([]byte(recipeVersion() + "\n" + strings.Join(lines, "\n")))
	return hex.EncodeToString(sum[:])
}

func readManifest(dir string) (Image, error) {
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return Image{}, err
	}
	var img Image
	if err := json.Unmarshal(b, &img); err != nil {
		return Image{}, err
	}
	for _, p := range []string{img.Kernel, img.Initrd} {
		if _, err := os.Stat(p); err != nil {
			return Image{}, err
		}
	}
	return img, nil
}

// assemble extracts the kernel and modules, orders the modules with depmod's
// modules.dep, writes vmlinuz and the initramfs and then the manifest, in a
// fresh directory renamed into place.
func assemble(ctx context.Context, root, dir, key string, want map[string]string, debs map[string]string) (Image, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return Image{}, err
	}
	work, err := os.MkdirTemp(root, "work-")
	if err != nil {
		return Image{}, err
	}
	defer os.RemoveAll(work)
	var kernelPkg string
	for n := range want {
		if isCloudKernel(n) {
			kernelPkg = n
		}
	}
	tree := filepath.Join(work, "tree")
	// The SSH server's and the tools' packages first: their files and links under the
	// library directories, and their binaries (ELFClosure picks what the binaries need).
	for n, deb := range debs {
		if n == kernelPkg || n == "busybox-static" {
			continue
		}
		if _, err := extractDeb(ctx, deb, tree, keepFile); err != nil {
			return Image{}, err
		}
	}
	files, err := ELFClosure(tree, binaries())
	if err != nil {
		return Image{}, fmt.Errorf("ssh server and tools: %w", err)
	}
	if _, err := extractDeb(ctx, debs[kernelPkg], tree, func(p string) bool {
		p = strings.TrimPrefix(p, "usr/")
		return strings.HasPrefix(p, "boot/vmlinuz-") || strings.HasPrefix(p, "lib/modules/")
	}); err != nil {
		return Image{}, err
	}
	if _, err := extractDeb(ctx, debs["busybox-static"], tree, func(p string) bool { return p == "bin/busybox" || p == "usr/bin/busybox" }); err != nil {
		return Image{}, err
	}
	vmlinuz, _ := filepath.Glob(filepath.Join(tree, "boot", "vmlinuz-*"))
	if len(vmlinuz) != 1 {
		return Image{}, fmt.Errorf("%s: want one boot/vmlinuz-*, found %d", kernelPkg, len(vmlinuz))
	}
	kver := strings.TrimPrefix(filepath.Base(vmlinuz[0]), "vmlinuz-")
	modRoot := tree
	if _, err := os.Stat(filepath.Join(tree, "usr", "lib", "modules", kver)); err == nil {
		modRoot = filepath.Join(tree, "usr")
	}
	modDir := filepath.Join(modRoot, "lib", "modules", kver)
	if out, err := exec.CommandContext(ctx, "depmod", "-b", modRoot, kver).CombinedOutput(); err != nil {
		return Image{}, fmt.Errorf("depmod -b %s %s: %w: %s (install the kmod package)", modRoot, kver, err, out)
	}
	depText, err := os.ReadFile(filepath.Join(modDir, "modules.dep"))
	if err != nil {
		return Image{}, err
	}
	deps, err := ParseModulesDep(string(depText))
	if err != nil {
		return Image{}, err
	}
	builtin, _ := os.ReadFile(filepath.Join(modDir, "modules.builtin"))
	order, err := ModuleLoadOrder(deps, string(builtin), append(append(append([]string(nil), NetModules...), DriveModules...), PowerModules...))
	if err != nil {
		return Image{}, fmt.Errorf("kernel %s: %w", kver, err)
	}
	var mods []Module
	var names []string
	for _, p := range order {
		if strings.HasSuffix(p, ".xz") || strings.HasSuffix(p, ".zst") || strings.HasSuffix(p, ".gz") {
			return Image{}, fmt.Errorf("kernel %s: compressed module %s is not supported", kver, p)
		}
		data, err := os.ReadFile(filepath.Join(modDir, p))
		if err != nil {
			return Image{}, err
		}
		mods = append(mods, Module{Name: ModuleName(p), Data: data})
		names = append(names, ModuleName(p))
	}
	bbPath := filepath.Join(tree, "bin", "busybox")
	if _, err := os.Stat(bbPath); err != nil {
		bbPath = filepath.Join(tree, "usr", "bin", "busybox")
	}
	busybox, err := os.ReadFile(bbPath)
	if err != nil {
		return Image{}, fmt.Errorf("busybox-static: %w", err)
	}
	out := filepath.Join(work, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return Image{}, err
	}
	if err := os.Rename(vmlinuz[0], filepath.Join(out, "vmlinuz")); err != nil {
		return Image{}, err
	}
	f, err := os.Create(filepath.Join(out, "initrd.img"))
	if err != nil {
		return Image{}, err
	}
	err = writeInitrd(f, busybox, files, mods)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Image{}, err
	}
	img := Image{Kernel: filepath.Join(dir, "vmlinuz"), Initrd: filepath.Join(dir, "initrd.img"), Key: key,
		KernelVersion: kver, Packages: want, Modules: names}
	b, err := json.MarshalIndent(img, "", "  ")
	if err != nil {
		return Image{}, err
	}
	if err := os.WriteFile(filepath.Join(out, "manifest.json"), b, 0o644); err != nil {
		return Image{}, err
	}
	// 0755 so that qemu (user libvirt-qemu) may read what it boots.
	for _, p := range []string{out, filepath.Join(out, "vmlinuz"), filepath.Join(out, "initrd.img")} {
		mode := os.FileMode(0o644)
		if p == out {
			mode = 0o755
		}
		if err := os.Chmod(p, mode); err != nil {
			return Image{}, err
		}
	}
	os.RemoveAll(dir) // an incomplete earlier attempt
	if err := os.Rename(out, dir); err != nil {
		return Image{}, err
	}
	return img, nil
}

// pruneDebs removes the .debs of versions no longer used.
func pruneDebs(dir string, keep map[string]string) {
	want := map[string]bool{}
	for _, p := range keep {
		want[filepath.Base(p)] = true
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".deb") && !want[e.Name()] {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
