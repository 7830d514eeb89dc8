package openstack

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The tests below run against the dev cloud osd init made on this host
// (skipped where it has no clouds.yaml). Those that change the cloud's
// day-one state or boot servers run only when asked for by environment.
// OSD_CLOUDS_YAML names another clouds.yaml (cloud "osd").
const devCloudsYAML = "/var/lib/osd/clouds.yaml"

func devCredentials(t *testing.T) Credentials {
	t.Helper()
	path := devCloudsYAML
	if p := os.Getenv("OSD_CLOUDS_YAML"); p != "" {
		path = p
	}
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no dev cloud on this host (%v)", err)
	}
	creds, err := LoadCloudsYAML(path, "osd")
	if err != nil {
		t.Fatalf("LoadCloudsYAML: %v", err)
	}
	return creds
}

func devClient(t *testing.T, services ...string) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Authenticate(ctx, devCredentials(t))
	if err != nil {
		t.Fatalf("Authenticate(dev cloud): %v", err)
	}
	for _, s := range services {
		if _, err := c.Endpoint(s); err != nil {
			t.Skipf("dev cloud: %v", err)
		}
	}
	return c
}

func suffix(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func TestDevCloudKeystoneGlance(t *testing.T) {
	creds := devCredentials(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bad := creds
	bad.Password = "wrong-" + suffix(t)
	if _, err := Authenticate(ctx, bad); statusOf(err) != 401 || !strings.Contains(err.Error(), "requires authentication") {
		t.Errorf("Authenticate(wrong password) error = %v, want 401 with Keystone's message", err)
	}
	c := devClient(t, "image")
	for _, s := range []string{"identity", "image"} {
		u, err := c.Endpoint(s)
		t.Logf("endpoint %s = %s", s, u)
		if err != nil || !strings.HasPrefix(u, "http") {
			t.Errorf("Endpoint(%s) = %q, %v, want a URL", s, u, err)
		}
	}
	if c.ProjectID() == "" {
		t.Error("ProjectID() is empty")
	}

	name := "osd-clienttest-" + suffix(t)
	im, err := c.CreateImage(ctx, ImageRequest{Name: name, DiskFormat: "aki", ContainerFormat: "aki", Visibility: "private", Properties: map[string]string{"osd_guest_key": "test"}})
	if err != nil {
		t.Fatalf("CreateImage: %v", err)
	}
	t.Cleanup(func() { c.DeleteImage(context.Background(), im.ID) })
	data := make([]byte, 4096)
	rand.Read(data)
	if err := c.UploadImage(ctx, im.ID, func() io.Reader { return bytes.NewReader(data) }); err != nil {
		t.Fatalf("UploadImage: %v", err)
	}
	got, err := c.GetImage(ctx, im.ID)
	if err != nil || got.Status != "active" || got.Size != 4096 || got.DiskFormat != "aki" || got.GuestKey != "test" {
		t.Errorf("GetImage(uploaded) = %+v, %v, want active, 4096 bytes, aki, osd_guest_key test", got, err)
	}
	list, err := c.ListImages(ctx, name)
	if err != nil || len(list) != 1 || list[0].ID != im.ID {
		t.Errorf("ListImages(%s) = %+v, %v, want the one image", name, list, err)
	}
	badImg, err := c.CreateImage(ctx, ImageRequest{Name: name + "-bad", DiskFormat: "no-such-format", ContainerFormat: "bare", Visibility: "private"})
	if badImg.ID != "" {
		c.DeleteImage(context.Background(), badImg.ID)
	}
	t.Logf("CreateImage(unknown disk format) error: %v", err)
	if statusOf(err) != 400 || !strings.Contains(err.Error(), "no-such-format") {
		t.Errorf("CreateImage(unknown disk format) error = %v, want 400 with Glance's message", err)
	}
	if err := c.DeleteImage(ctx, im.ID); err != nil {
		t.Fatalf("DeleteImage: %v", err)
	}
	if _, err := c.GetImage(ctx, im.ID); !IsNotFound(err) {
		t.Errorf("GetImage(deleted) error = %v, want 404", err)
	}
}

func TestDevCloudNovaNeutron(t *testing.T) {
	c := devClient(t, "compute", "network")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.ListFlavors(ctx); err != nil {
		t.Errorf("ListFlavors: %v", err)
	}
	if _, err := c.ListNetworks(ctx, ""); err != nil {
		t.Errorf("ListNetworks: %v", err)
	}
	_, err := c.GetServer(ctx, "00000000-0000-0000-0000-000000000000")
	if !IsNotFound(err) || !strings.Contains(err.Error(), "could not be found") {
		t.Errorf("GetServer(missing) error = %v, want 404 with Nova's message", err)
	}
	_, err = c.CreateNetwork(ctx, Network{Name: "osd-clienttest-" + suffix(t), NetworkType: "flat", PhysicalNetwork: "no-such-physnet-" + suffix(t)})
	if statusOf(err) != 400 || !strings.Contains(err.Error(), "no-such-physnet") {
		t.Errorf("CreateNetwork(unknown physnet) error = %v, want 400 naming the physical network", err)
	}
	svcs, err := c.ComputeServices(ctx, "")
	if err != nil || len(svcs) == 0 {
		t.Errorf("ComputeServices() = %v, %v, want the dev cloud's nova-compute", svcs, err)
	}
	for _, s := range svcs {
		if s.Binary != "nova-compute" || s.Host == "" {
			t.Errorf("ComputeServices() row %+v, want a nova-compute with its host", s)
		}
	}
	if changed, err := c.DisableComputeService(ctx, "no-such-host-"+suffix(t), "test"); changed || err != nil {
		t.Errorf("DisableComputeService(unknown host) = %v, %v, want false, nil", changed, err)
	}
}

// TestDevCloudDayOne runs day-one twice on the dev cloud (OSD_DEVCLOUD_DAYONE=1):
// the second run must change nothing. It leaves the day-one resources, as osd
// init's day-one step does.
func TestDevCloudDayOne(t *testing.T) {
	creds := devCredentials(t)
	if os.Getenv("OSD_DEVCLOUD_DAYONE") != "1" {
		t.Skip("set OSD_DEVCLOUD_DAYONE=1 to make the day-one resources on the dev cloud")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cfg := DayOneConfig{Credentials: creds, CacheDir: "/var/cache/osd", Progress: func(s string) { t.Log(s) }}
	start := time.Now()
	changed, detail, err := EnsureDayOne(ctx, cfg)
	t.Logf("first run (%s): changed=%v %s", time.Since(start).Round(time.Millisecond), changed, detail)
	if err != nil {
		t.Fatalf("EnsureDayOne: %v", err)
	}
	start = time.Now()
	changed, detail, err = EnsureDayOne(ctx, cfg)
	t.Logf("second run (%s): changed=%v %s", time.Since(start).Round(time.Millisecond), changed, detail)
	if err != nil || changed {
		t.Errorf("EnsureDayOne(again) = %v, %q, %v, want no change", changed, detail, err)
	}
}

// TestDevCloudLaunch launches a server on the dev cloud (OSD_DEVCLOUD_LAUNCH=1,
// after day-one), waits until the host pings its floating IP, then deletes
// the server and the floating IP.
func TestDevCloudLaunch(t *testing.T) {
	if os.Getenv("OSD_DEVCLOUD_LAUNCH") != "1" {
		t.Skip("set OSD_DEVCLOUD_LAUNCH=1 to boot a server on the dev cloud")
	}
	c := devClient(t, "compute", "network", "image")
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	req := LaunchRequest{Name: "osd-launchtest-" + suffix(t)}
	t.Cleanup(func() {
		ctx := context.Background()
		srvs, _ := c.ListServers(ctx, false)
		for _, s := range srvs {
			if s.Name != req.Name {
				continue
			}
			ports, _ := c.ListPorts(ctx, map[string]string{"device_id": s.ID})
			for _, p := range ports {
				fips, _ := c.ListFloatingIPs(ctx, map[string]string{"port_id": p.ID})
				for _, f := range fips {
					if err := c.DeleteFloatingIP(ctx, f.ID); err != nil {
						t.Errorf("delete floating IP %s: %v", f.FloatingIPAddress, err)
					}
				}
			}
			if err := c.DeleteServer(ctx, s.ID); err != nil {
				t.Errorf("delete server %s: %v", s.ID, err)
			}
		}
	})
	start := time.Now()
	l := Launcher{Client: c, Probe: HostNetwork{}, KeyFile: KeyFile("/var/lib/osd"), KnownHosts: filepath.Join(t.TempDir(), "known_hosts")}
	tg, err := l.Resolve(ctx, req)
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	res, err := l.Launch(ctx, tg, func(s string) { t.Logf("%s %s", time.Since(start).Round(100*time.Millisecond), s) })
	t.Logf("result: %+v", res)
	if err != nil {
		if out, cerr := c.ConsoleOutput(context.Background(), res.ID, 40); cerr == nil {
			t.Logf("console tail:\n%s", out)
		}
		t.Fatalf("Launch: %v", err)
	}
	if !res.Reachable || res.FloatingIP == "" || res.FixedIP == "" {
		t.Errorf("Launch() = %+v, want reachable with fixed and floating IPs", res)
	}
	// The security group lets TCP 22 in; the guest's SSH server answers it.
	var banner []byte
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(res.FloatingIP, "22"), 3*time.Second)
		if err == nil {
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			banner = make([]byte, 64)
			n, rerr := conn.Read(banner)
			banner, err = banner[:n], rerr
			conn.Close()
		}
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if !strings.HasPrefix(string(banner), "SSH-2.0-dropbear") {
		t.Errorf("TCP %s:22 answered %q, want the guest's SSH server", res.FloatingIP, banner)
	}
	if res.SSHIn == "" {
		t.Errorf("Launch() = %+v, want an SSH login", res)
	}
	out, err := c.ConsoleOutput(ctx, res.ID, 0)
	if err != nil || !strings.Contains(out, "osd-guest: eth0 "+res.FixedIP+"/") {
		t.Errorf("console of %s lacks the lease marker for %s (err %v)", res.ID, res.FixedIP, err)
	}
}
