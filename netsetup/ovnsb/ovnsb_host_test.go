package ovnsb

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// imageCache is where osd keeps the images it builds (the ovn image carries OVN's schemas).
const imageCache = "/var/cache/osd/images/oci"

// sbSchema extracts OVN's southbound schema from the ovn image osd built.
func sbSchema(t *testing.T) string {
	t.Helper()
	ii, err := layout.ImageIndexFromPath(imageCache)
	if err != nil {
		t.Skipf("no image cache at %s (osd images build ovn makes it): %v", imageCache, err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range im.Manifests {
		if d.Annotations["org.osdcloud.osd.image"] != "ovn" {
			continue
		}
		img, err := ii.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		if schema := fileInImage(t, img, "usr/share/ovn/ovn-sb.ovsschema"); schema != "" {
			return schema
		}
	}
	t.Skipf("the image cache has no ovn image with OVN's southbound schema (osd images build ovn)")
	return ""
}

func fileInImage(t *testing.T, img v1.Image, name string) string {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				rc.Close()
				t.Fatal(err)
			}
			if strings.TrimPrefix(h.Name, "./") == name {
				b, _ := io.ReadAll(tr)
				rc.Close()
				p := filepath.Join(t.TempDir(), filepath.Base(name))
				if err := os.WriteFile(p, b, 0o644); err != nil {
					t.Fatal(err)
				}
				return p
			}
		}
		rc.Close()
	}
	return ""
}

// TestSouthboundChassis runs an OVN southbound database (Debian's ovsdb-server with the
// schema of the ovn image) holding two chassis as ovn-controller registers them: List
// shows each with its Geneve endpoint, DeleteHost deletes one node's chassis with its
// Chassis_Private and Encap rows and leaves the other.
func TestSouthboundChassis(t *testing.T) {
	if testing.Short() {
		t.Skip("runs ovsdb-server")
	}
	for _, tool := range []string{"ovsdb-tool", "ovsdb-server", "ovsdb-client"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not installed (test/deps.sh installs openvswitch-switch): %v", tool, err)
		}
	}
	schema := sbSchema(t)
	dir, err := os.MkdirTemp("", "osdsb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	db, sock := filepath.Join(dir, "sb.db"), filepath.Join(dir, "sb.sock")
	if out, err := exec.Command("ovsdb-tool", "create", db, schema).CombinedOutput(); err != nil {
		t.Fatalf("ovsdb-tool create: %v\n%s", err, out)
	}
	srv := exec.Command("ovsdb-server", "--remote=punix:"+sock, "--no-chdir", "--unixctl="+filepath.Join(dir, "ctl"), db)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, c := range []struct{ name, host, ip string }{{"aaaa", "node1", "10.0.0.1"}, {"bbbb", "node2", "10.0.0.2"}} {
		txn := `["OVN_Southbound",
			{"op":"insert","table":"Encap","uuid-name":"e","row":{"type":"geneve","ip":"` + c.ip + `","chassis_name":"` + c.name + `"}},
			{"op":"insert","table":"Chassis","uuid-name":"c","row":{"name":"` + c.name + `","hostname":"` + c.host + `","encaps":["named-uuid","e"]}},
			{"op":"insert","table":"Chassis_Private","row":{"name":"` + c.name + `","chassis":["named-uuid","c"]}}]`
		if out, err := exec.Command("ovsdb-client", "transact", "unix:"+sock, txn).CombinedOutput(); err != nil || strings.Contains(string(out), "error") {
			t.Fatalf("insert chassis %s: %v\n%s", c.name, err, out)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sb, err := Connect(ctx, "unix:"+sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	list, err := sb.List(ctx)
	want := []ChassisInfo{{Name: "aaaa", Hostname: "node1", Encaps: []string{"geneve 10.0.0.1"}}, {Name: "bbbb", Hostname: "node2", Encaps: []string{"geneve 10.0.0.2"}}}
	if err != nil || !reflect.DeepEqual(list, want) {
		t.Fatalf("List() = %+v, %v, want %+v", list, err, want)
	}
	if names, err := sb.DeleteHost(ctx, "node2"); err != nil || !reflect.DeepEqual(names, []string{"bbbb"}) {
		t.Fatalf("DeleteHost(node2) = %v, %v, want [bbbb]", names, err)
	}
	if names, err := sb.DeleteHost(ctx, "node3"); err != nil || names != nil {
		t.Errorf("DeleteHost(node3) = %v, %v, want nothing to delete", names, err)
	}
	for table, want := range map[string]string{"Chassis": "aaaa", "Chassis_Private": "aaaa", "Encap": "10.0.0.1"} {
		out, err := exec.Command("ovsdb-client", "dump", "unix:"+sock, "OVN_Southbound", table).CombinedOutput()
		if err != nil || !strings.Contains(string(out), want) || strings.Contains(string(out), "bbbb") || strings.Contains(string(out), "10.0.0.2") {
			t.Errorf("%s after DeleteHost(node2): %v\n%s\nwant only node1's row", table, err, out)
		}
	}
}
