package ctrimport

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/osdcloud/osd/bootstrap/images"
)

// startContainerd runs the host's containerd (Debian package containerd)
// with a private root, state and socket, and stops it at cleanup. The
// embedded k3s containerd is the production target; this is the same API.
func startContainerd(t *testing.T) string { return startContainerdB(t) }

func startContainerdB(t testing.TB) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("containerd needs root")
	}
	bin, err := exec.LookPath("containerd")
	if err != nil {
		t.Fatalf("containerd not installed (test/deps.sh installs it): %v", err)
	}
	dir, err := os.MkdirTemp("", "osd-ctrd-") // short: socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "c.sock")
	cfg := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = %q
[ttrpc]
  address = %q
[plugins."io.containerd.internal.v1.opt"]
  path = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock, filepath.Join(dir, "t.sock"), filepath.Join(dir, "opt"))
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", filepath.Join(dir, "config.toml"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		logf.Close()
		// Unmount snapshot mounts containerd may have left, then remove.
		exec.Command("umount", "-R", filepath.Join(dir, "root")).Run()
		os.RemoveAll(dir)
	})
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(sock); err == nil {
			return sock
		}
		time.Sleep(100 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "log"))
	t.Fatalf("containerd did not start: %s", log)
	return ""
}

func TestImport(t *testing.T) {
	sock := startContainerd(t)
	pause, err := images.PauseImage()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	if err := Import(ctx, sock, pause, images.PauseRef); err != nil {
		t.Fatalf("Import(pause) = %v", err)
	}
	t.Logf("imported pause in %s", time.Since(start))

	c, err := containerd.New(sock, containerd.WithDefaultNamespace(Namespace))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nctx := namespaces.WithNamespace(ctx, Namespace)
	want, _ := pause.Digest()
	img, err := c.GetImage(nctx, "docker.io/rancher/mirrored-pause:3.6")
	if err != nil {
		t.Fatalf("GetImage(pause) = %v", err)
	}
	if got := img.Target().Digest.String(); got != want.String() {
		t.Errorf("containerd pause digest = %s, want %s (same as the store)", got, want)
	}
	if l := img.Labels()[PinnedLabel]; l != "pinned" {
		t.Errorf("pause label %s = %q, want pinned", PinnedLabel, l)
	}
	if ok, err := img.IsUnpacked(nctx, ""); err != nil || !ok {
		t.Errorf("pause IsUnpacked = %v, %v; want true", ok, err)
	}

	// A docker-save archive (what WriteArchiveFile drops for k3s) imports too;
	// containerd then keeps the config digest (the image ID).
	other, err := images.ImageFromFiles([]images.File{{Path: "hello", Mode: 0o644, Data: []byte("hi")}}, images.ImageConfig{Cmd: []string{"/hello"}})
	if err != nil {
		t.Fatal(err)
	}
	arch := filepath.Join(t.TempDir(), "images.tar")
	if err := images.WriteArchiveFile(arch, map[string]v1.Image{"localhost/osd/hello:1": other}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(arch)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	imgs, err := c.Import(nctx, f, containerd.WithAllPlatforms(true))
	if err != nil {
		t.Fatalf("containerd Import(docker-save archive) = %v", err)
	}
	var names []string
	for _, i := range imgs {
		names = append(names, i.Name)
	}
	if len(imgs) != 1 || imgs[0].Name != "localhost/osd/hello:1" {
		t.Fatalf("docker-save import created %v, want [localhost/osd/hello:1]", names)
	}
	// A localhost reference through Import (OCI archive) keeps its name
	// and the store's manifest digest.
	if err := Import(ctx, sock, other, "localhost/osd/hello-oci:1"); err != nil {
		t.Fatalf("Import(localhost/osd/hello-oci:1) = %v", err)
	}
	oci, err := c.GetImage(nctx, "localhost/osd/hello-oci:1")
	if err != nil {
		t.Fatalf("GetImage(localhost/osd/hello-oci:1) = %v", err)
	}
	if od, _ := other.Digest(); oci.Target().Digest.String() != od.String() {
		t.Errorf("hello-oci digest = %s, want %s", oci.Target().Digest, od)
	}
	cfgWant, _ := other.ConfigName()
	cfgGot, err := containerd.NewImage(c, imgs[0]).Config(nctx)
	if err != nil || cfgGot.Digest.String() != cfgWant.String() {
		t.Errorf("docker-save import config = %v, %v; want %s", cfgGot.Digest, err, cfgWant)
	}
}
