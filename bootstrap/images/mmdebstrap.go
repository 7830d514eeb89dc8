package images

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/osdcloud/osd/bootstrap/images/oci"
)

// MmdebstrapArgs returns the mmdebstrap command line for a recipe (pure).
func MmdebstrapArgs(r Recipe, sources []AptSource, rootfs, debCache, essentialHook, customizeHook string) []string {
	variant := r.Variant
	if variant == "" {
		variant = defaultVariant
	}
	args := []string{
		"--mode=root", "--variant=" + variant, "--format=directory", "--verbose",
		"--aptopt=APT::Install-Recommends \"false\"",
		"--aptopt=Acquire::Languages \"none\"",
		"--dpkgopt=path-exclude=/usr/share/doc/*",
		"--dpkgopt=path-include=/usr/share/doc/*/copyright",
		"--dpkgopt=path-exclude=/usr/share/man/*",
		"--dpkgopt=path-exclude=/usr/share/locale/*",
		"--dpkgopt=path-exclude=/usr/share/info/*",
		"--dpkgopt=force-unsafe-io", // no sync per file: an interrupted build is thrown away whole
		"--skip=essential/unlink",
		"--setup-hook=mkdir -p \"$1/var/cache/apt/archives\"",
		"--setup-hook=sync-in " + debCache + " /var/cache/apt/archives/",
		"--essential-hook=" + essentialHook,
		"--customize-hook=" + customizeHook,
		"--customize-hook=sync-out /var/cache/apt/archives " + debCache,
	}
	if len(r.Packages) > 0 {
		args = append(args, "--include="+strings.Join(r.Packages, ","))
	}
	args = append(args, r.Suite, rootfs)
	for _, s := range sources {
		args = append(args, s.Line())
	}
	return args
}

// mmdebstrap builds the root of an image without a base into rootfs, installing the
// .debs of debs (a directory of this build's own) and downloading what it lacks there.
func (b *Builder) mmdebstrap(ctx context.Context, r Recipe, work, rootfs, debs string, total int) error {
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return fmt.Errorf("mmdebstrap not found (install the mmdebstrap package): %w", err)
	}
	srcs, err := b.sources(r.Suite)
	if err != nil {
		return err
	}
	host, err := os.Hostname()
	if err != nil {
		return err
	}
	ess := filepath.Join(work, "essential-hook.sh")
	cus := filepath.Join(work, "customize-hook.sh")
	if err := os.WriteFile(ess, []byte(essentialHook(r, host)), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(cus, []byte(customizeHook(filepath.Join(work, "packages.txt"))), 0o755); err != nil {
		return err
	}
	args := MmdebstrapArgs(r, srcs, rootfs, debs, ess, cus)
	b.emit(Event{Image: r.Name, Step: "install", Total: total, Message: "mmdebstrap " + r.Suite})
	cmd := exec.CommandContext(ctx, "mmdebstrap", args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8", "DEBIAN_FRONTEND=noninteractive")
	if err := b.runLogged(r.Name, total, cmd); err != nil {
		return fmt.Errorf("mmdebstrap: %w", err)
	}
	return nil
}

// runLogged runs a package tool in its own process group (killed whole when ctx
// ends), logging its output, counting "Setting up" lines as install progress, and
// returns the last lines of its output with an error.
func (b *Builder) runLogged(image string, total int, cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	tail := newTailBuffer(30)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		setUp := 0
		for sc.Scan() {
			line := sc.Text()
			tail.add(line)
			b.logger().Debug(filepath.Base(cmd.Path), "image", image, "line", line)
			switch {
			case strings.HasPrefix(line, "Setting up "):
				setUp++
				b.emit(Event{Image: image, Step: "install", Packages: setUp, Total: total, Message: line})
			case strings.HasPrefix(line, "I: "):
				b.emit(Event{Image: image, Step: "install", Packages: setUp, Total: total, Message: strings.TrimPrefix(line, "I: ")})
			}
		}
		io.Copy(io.Discard, pr)
	}()
	err := cmd.Run()
	pw.Close()
	<-done
	if err != nil {
		return fmt.Errorf("%w: %s", err, tail.String())
	}
	return nil
}

// writeFiles adds recipe files to a root filesystem.
func writeFiles(root string, files []File) error {
	entries, err := oci.NormalizeFiles(files)
	if err != nil {
		return err
	}
	for _, f := range entries {
		p := filepath.Join(root, filepath.FromSlash(f.Path))
		switch {
		case f.Mode&os.ModeSymlink != 0:
			os.Remove(p)
			if err := os.Symlink(f.Link, p); err != nil {
				return err
			}
		case f.Mode.IsDir():
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		default:
			if err := os.WriteFile(p, f.Data, 0o600); err != nil {
				return err
			}
		}
		if err := os.Lchown(p, f.UID, f.GID); err != nil {
			return err
		}
		if f.Mode&os.ModeSymlink == 0 {
			mode := f.Mode.Perm() | f.Mode&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky)
			if f.Mode&0o4000 != 0 {
				mode |= os.ModeSetuid
			}
			if f.Mode&0o2000 != 0 {
				mode |= os.ModeSetgid
			}
			if f.Mode&0o1000 != 0 {
				mode |= os.ModeSticky
			}
			if err := os.Chmod(p, mode); err != nil {
				return err
			}
		}
	}
	return nil
}

// tailBuffer keeps the last n lines of a tool's output for error messages.
type tailBuffer struct {
	mu    sync.Mutex
	n     int
	lines []string
}

func newTailBuffer(n int) *tailBuffer { return &tailBuffer{n: n} }

func (t *tailBuffer) add(l string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, l)
	if len(t.lines) > t.n {
		t.lines = t.lines[len(t.lines)-t.n:]
	}
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}
