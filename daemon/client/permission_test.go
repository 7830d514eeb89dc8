package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/osdcloud/osd/daemon/rest"
)

const permEnv = "OSD_CLIENT_PERM_SOCKET"

// TestPermissionHelper runs as an unprivileged user in a child process of
// TestNonRootIsRefused and prints what the client says.
func TestPermissionHelper(t *testing.T) {
	path := os.Getenv(permEnv)
	if path == "" {
		t.Skip("helper process for TestNonRootIsRefused")
	}
	_, err := NewUnix(path).ServerInfo(context.Background())
	fmt.Printf("ERR=%v\nPERMISSION=%v\n", err, errors.Is(err, os.ErrPermission))
}

// A non-root user cannot reach the 0600 socket, and the client tells them to run as root.
func TestNonRootIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch to the nobody user")
	}
	// A world-readable copy of the test binary and a traversable directory for the socket,
	// so only the socket's own mode keeps the unprivileged child out.
	dir, err := os.MkdirTemp("", "osd-client-perm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "client.test")
	if err := copyExecutable(self, bin); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "unix.socket")
	l, err := rest.ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rest.Serve(ctx, l, rest.NewRouter(endpoints())) }()
	t.Cleanup(func() { cancel(); <-done })

	cmd := exec.Command(bin, "-test.run=^TestPermissionHelper$", "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = []string{permEnv + "=" + sock, "HOME=" + dir, "GOCOVERDIR=" + dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper as nobody: %v\n%s", err, out)
	}
	want := "ERR=permission denied on the osd socket " + sock + ": run as root (for example with sudo)\nPERMISSION=true"
	if !strings.Contains(string(out), want) {
		t.Errorf("client as nobody said:\n%s\nwant:\n%s", out, want)
	}
	// Root (this process) still gets through.
	if _, err := NewUnix(sock).ServerInfo(context.Background()); err != nil {
		t.Errorf("ServerInfo() as root = %v, want nil", err)
	}
}

func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
