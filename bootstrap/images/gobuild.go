package images

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/osdcloud/osd/bootstrap/images/oci"
)

// goTool finds the go command: GOROOT/bin/go of this binary's toolchain
// when present, else go on PATH.
func goTool() (string, error) {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); runtime.GOROOT() != "" {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("a Go toolchain is needed to build Go images: %w", err)
	}
	return p, nil
}

func goVersion(ctx context.Context) (string, error) {
	tool, err := goTool()
	if err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, tool, "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOVERSION: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// buildGo builds a static binary with `go install module@version` (its own
// module, so osd's go.mod is not involved; CGO_ENABLED=0, -trimpath, no
// symbols) and packs it with the recipe's files.
func (b *Builder) buildGo(ctx context.Context, r Recipe, clock *stepClock) (v1.Image, error) {
	tool, err := goTool()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(b.releaseDir(), "work"), 0o755); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(filepath.Join(b.releaseDir(), "work"), workName(r.Name))
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	pkg := r.Go.Package
	if pkg == "" {
		pkg = r.Go.Module
	}
	b.emit(Event{Image: r.Name, Step: "go-build", Message: "go install " + pkg + "@" + r.Go.Version})
	cmd := exec.CommandContext(ctx, tool, "install", "-trimpath", "-ldflags=-s -w -buildid=", pkg+"@"+r.Go.Version)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "GOBIN="+work, "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOFLAGS=", "GOTOOLCHAIN=local", "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go install %s@%s: %w: %s", pkg, r.Go.Version, err, lastLines(out.String(), 10))
	}
	bin, err := os.ReadFile(filepath.Join(work, filepath.Base(pkg)))
	if err != nil {
		return nil, fmt.Errorf("go install %s: %w", pkg, err)
	}
	clock.done("go-build")
	files := append([]File{{Path: r.Go.Binary, Mode: 0o755, Data: bin, Xattrs: r.Go.Xattrs}}, r.Files...)
	img, err := oci.ImageFromFiles(files, r.Config())
	clock.done("pack")
	return img, err
}
