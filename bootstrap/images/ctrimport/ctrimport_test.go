package ctrimport

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	digest "github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"

	"github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/bootstrap/images/oci"
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
	other, err := oci.ImageFromFiles([]oci.File{{Path: "hello", Mode: 0o644, Data: []byte("hi")}}, oci.ImageConfig{Cmd: []string{"/hello"}})
	if err != nil {
		t.Fatal(err)
	}
	arch := filepath.Join(t.TempDir(), "images.tar")
	if err := oci.WriteArchiveFile(arch, map[string]v1.Image{"localhost/osd/hello:1": other}); err != nil {
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

// TestImportSharedLayersLinked imports two images from an image store that share their
// lower layer, the second after the first: the shared layer is hard-linked into
// containerd's content store once (the same file, no copy), both images keep the
// store's manifest digests and are unpacked, and importing again changes nothing.
func TestImportSharedLayersLinked(t *testing.T) {
	sock := startContainerd(t)
	contentDir := filepath.Join(filepath.Dir(sock), "root", "io.containerd.content.v1.content")
	store, err := images.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	base, err := oci.ImageFromFiles([]oci.File{{Path: "bin/base", Mode: 0o755, Data: []byte("base")}}, oci.ImageConfig{})
	if err != nil {
		t.Fatal(err)
	}
	baseLayers, _ := base.Layers()
	top := func(name string) v1.Image {
		l, err := oci.ImageFromFiles([]oci.File{{Path: "etc/" + name, Mode: 0o644, Data: []byte(name)}}, oci.ImageConfig{})
		if err != nil {
			t.Fatal(err)
		}
		ls, _ := l.Layers()
		img, err := oci.ImageFromLayers(append(append([]v1.Layer(nil), baseLayers...), ls...), oci.ImageConfig{Cmd: []string{"/bin/base"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Put(img, images.Stored{Name: name, Ref: "localhost/osd/" + name + ":1"}); err != nil {
			t.Fatal(err)
		}
		got, _, err := store.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	a, b := top("a"), top("b")
	opts := Options{ContentDir: contentDir, BlobPath: store.BlobPath}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, x := range []struct {
		ref string
		img v1.Image
	}{{"localhost/osd/a:1", a}, {"localhost/osd/b:1", b}, {"localhost/osd/a:1", a}} {
		if err := ImportMany(ctx, sock, map[string]v1.Image{x.ref: x.img}, opts); err != nil {
			t.Fatalf("ImportMany(%s) = %v", x.ref, err)
		}
	}
	c, err := containerd.New(sock, containerd.WithDefaultNamespace(Namespace))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nctx := namespaces.WithNamespace(ctx, Namespace)
	for ref, img := range map[string]v1.Image{"localhost/osd/a:1": a, "localhost/osd/b:1": b} {
		got, err := c.GetImage(nctx, ref)
		if err != nil {
			t.Fatalf("GetImage(%s) = %v", ref, err)
		}
		want, _ := img.Digest()
		if got.Target().Digest.String() != want.String() {
			t.Errorf("%s digest = %s, want %s", ref, got.Target().Digest, want)
		}
		if ok, err := got.IsUnpacked(nctx, ""); err != nil || !ok {
			t.Errorf("%s IsUnpacked = %v, %v; want true", ref, ok, err)
		}
	}
	shared, _ := baseLayers[0].Digest()
	var inStore, inContainerd syscall.Stat_t
	if err := syscall.Stat(store.BlobPath(shared), &inStore); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(filepath.Join(contentDir, "blobs", "sha256", shared.Hex), &inContainerd); err != nil {
		t.Fatalf("shared layer not in containerd's content directory: %v", err)
	}
	if inStore.Ino != inContainerd.Ino {
		t.Errorf("shared layer: containerd holds a copy (inode %d), want the store's file (inode %d) linked", inContainerd.Ino, inStore.Ino)
	}
	info, err := c.ContentStore().Info(nctx, digest.Digest(shared.String()))
	if err != nil {
		t.Fatalf("content Info(shared layer) = %v", err)
	}
	if info.Size != int64(len(mustBytes(t, baseLayers[0]))) {
		t.Errorf("content Info(shared layer) size = %d", info.Size)
	}
}

func mustBytes(t *testing.T, l v1.Layer) []byte {
	t.Helper()
	rc, err := l.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestImportedWantsUnpacked: an image containerd has a record of at the right digest but
// has not unpacked (what a daemon killed while it unpacked, or an earlier osd, left) is not
// Imported; importing it again unpacks it, and then it is.
func TestImportedWantsUnpacked(t *testing.T) {
	sock := startContainerd(t)
	img, err := oci.ImageFromFiles([]oci.File{{Path: "etc/osd-unpack", Mode: 0o644, Data: []byte("x")}}, oci.ImageConfig{})
	if err != nil {
		t.Fatal(err)
	}
	const ref = "localhost/osd/unpack:1"
	d, _ := img.Digest()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if ok, err := Imported(ctx, sock, ref, d.String()); err != nil || ok {
		t.Fatalf("Imported before the import = %v, %v; want false", ok, err)
	}
	if err := Import(ctx, sock, img, ref); err != nil {
		t.Fatal(err)
	}
	if ok, err := Imported(ctx, sock, ref, d.String()); err != nil || !ok {
		t.Fatalf("Imported after the import = %v, %v; want true", ok, err)
	}
	if ok, err := Imported(ctx, sock, ref, "sha256:"+strings.Repeat("0", 64)); err != nil || ok {
		t.Errorf("Imported at another digest = %v, %v; want false", ok, err)
	}
	// Take the unpacked layers away, keeping the record.
	c, err := containerd.New(sock, containerd.WithDefaultNamespace(Namespace))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nctx := namespaces.WithNamespace(ctx, Namespace)
	cimg, err := c.GetImage(nctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	diffIDs, err := cimg.RootFS(nctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SnapshotService("").Remove(nctx, identity.ChainID(diffIDs).String()); err != nil {
		t.Fatalf("remove the image's snapshot: %v", err)
	}
	if ok, err := Imported(ctx, sock, ref, d.String()); err != nil || ok {
		t.Fatalf("Imported with the record but no unpacked layers = %v, %v; want false", ok, err)
	}
	if err := Import(ctx, sock, img, ref); err != nil {
		t.Fatal(err)
	}
	if ok, err := Imported(ctx, sock, ref, d.String()); err != nil || !ok {
		t.Errorf("Imported after importing again = %v, %v; want true", ok, err)
	}
}
