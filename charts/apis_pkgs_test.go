package charts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/daemon/deploy"
	corev1 "k8s.io/api/core/v1"
)

// TestAPIChartsWithDebianPackages runs what the placement and glance charts render against
// Debian's own packages, outside any container: the config-render step, the Job's db-sync
// command, the Deployment's command with the rendered config files, the probe path, an
// unauthenticated request (401 pointing at www_authenticate_uri) and, for glance, an image
// upload into the file store (paste flavor without keystone). Only what a host cannot
// provide is overridden through the values, as any operator would: the database is SQLite
// (no MariaDB here), the listener is a free loopback port, and file paths point into
// OSD_CHARTS_PKGROOT and t.TempDir(). Keystone is not contacted.
//
// The packages come from debianPkgRoot (extracted into the cache directory, reused while
// the package versions stay the same), or from a directory in OSD_CHARTS_PKGROOT made by:
//
//	apt-get install --download-only --no-install-recommends -o Dir::Cache::archives=DIR/debs \
//	  python3-placement python3-glance glance-common glance-api python3-keystonemiddleware \
//	  python3-pymysql python3-memcache uwsgi-core uwsgi-plugin-python3
//	for d in DIR/debs/*.deb; do dpkg-deb -x $d DIR/root; done
//
// Either way only what the host lacks is extracted (no chroot, nothing installed), so the
// host's installed Python packages complete the tree for Debian bookworm's /usr/bin/python3.
func TestAPIChartsWithDebianPackages(t *testing.T) {
	if testing.Short() {
		t.Skip("starts glance-api and placement under uwsgi; skipped in -short")
	}
	if rel := testRelease(t); rel.Suite != images.DefaultSuite {
		t.Skipf("runs the packages with this host's Python, which is not %s's (TestChartsInDebianRootfs runs a release's packages in their own rootfs)", rel.Title())
	}
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("Debian's %s is not installed (test/deps.sh installs it): %v", python, err)
	}
	root := os.Getenv("OSD_CHARTS_PKGROOT")
	if root == "" {
		root = debianPkgRoot(t, apiPackages)
	}
	plugins, _ := filepath.Glob(filepath.Join(root, "usr/lib/uwsgi/plugins/python3*_plugin.so"))
	for _, f := range []string{"usr/bin/placement-api", "usr/bin/placement-manage", "usr/bin/glance-api", "usr/bin/glance-manage", "usr/bin/uwsgi-core", "usr/share/glance-common/glance-api-paste.ini"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Fatalf("package tree %s lacks %s: %v", root, f, err)
		}
	}
	if len(plugins) == 0 {
		t.Fatalf("package tree %s lacks uwsgi's python3 plugin", root)
	}
	env := []string{
		"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8",
		"PYTHONPATH=" + filepath.Join(root, "usr/lib/python3/dist-packages"),
		"LD_LIBRARY_PATH=" + filepath.Join(root, "usr/lib/x86_64-linux-gnu") + ":" + filepath.Join(root, "lib/x86_64-linux-gnu"),
	}
	// The packages' programs, run from the tree: Python scripts with Debian's python3.
	program := func(name string) []string {
		switch name {
		case "uwsgi":
			return []string{filepath.Join(root, "usr/bin/uwsgi-core")}
		case "/usr/bin/python3":
			return []string{python}
		}
		return []string{python, filepath.Join(root, "usr/bin", name)}
	}

	t.Run("placement", func(t *testing.T) {
		port, data := freePort(t), t.TempDir()
		spec := overrides("placement", map[string]any{"conf": map[string]any{
			"placement": map[string]any{"placement_database": map[string]any{"connection": "sqlite:///" + filepath.Join(data, "placement.db")}},
			"uwsgi": map[string]any{"uwsgi": map[string]any{
				"http11-socket": fmt.Sprintf("127.0.0.1:%d", port),
				"wsgi-file":     filepath.Join(root, "usr/bin/placement-api"),
				// Rendered keys are sorted, so "plugin" is read before "plugins-dir": in the
				// image the plugin is found in uwsgi's built-in /usr/lib/uwsgi/plugins.
				"plugin": plugins[0],
				// One process: each worker syncs the trait table at start, and two writers
				// on SQLite fail with "database is locked" (MariaDB in the cluster has no
				// such limit); about one start in two failed with the chart's two.
				"processes": 1,
			}},
		}})
		objs, _, _ := renderAPI(t, "placement", spec)
		conf, _ := runConfigRender(t, containerByName(objs.job.Spec.Template.Spec.InitContainers, "config-render"), objs.secrets[0].StringData)
		// placement.wsgi reads $OS_PLACEMENT_CONFIG_DIR/placement.conf (in the pod:
		// /etc/placement/placement.conf, its default location).
		penv := append(env, "OS_PLACEMENT_CONFIG_DIR="+conf)
		// The Deployment's wait-db before the db sync: waiting, then giving up (after 3 s
		// here, 1800 in the chart); after it: passing at once.
		wait := *containerByName(objs.deployment.Spec.Template.Spec.InitContainers, "wait-db")
		wait.Command = slices.Clone(wait.Command)
		wait.Command[len(wait.Command)-1] = "3"
		args := hostArgs(t, wait, conf, program)
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = penv
		if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "waiting for the placement-init Job") ||
			!strings.Contains(string(out), "the placement-init Job has not migrated it") || strings.Contains(string(out), "Traceback") {
			t.Errorf("wait-db before the db sync = %v\n%s\nwant it waiting, then giving up naming the Job", err, tail(string(out), 10))
		}
		runStep(t, objs.job.Spec.Template.Spec, "db-sync", conf, program, penv)
		runStep(t, objs.deployment.Spec.Template.Spec, "wait-db", conf, program, penv)
		api := containerByName(objs.deployment.Spec.Template.Spec.Containers, "placement")
		start(t, hostArgs(t, *api, conf, program), penv, filepath.Join(data, "placement.log"))
		base := fmt.Sprintf("http://127.0.0.1:%d", port)
		resp := waitProbe(t, base, *api.ReadinessProbe, filepath.Join(data, "placement.log"))
		if !strings.Contains(resp.body, `"versions"`) || !resp.close {
			t.Errorf("GET / = %s, Connection: close %v, want the version document and Connection: close", resp.body, resp.close)
		}
		checkUnauthorized(t, base+"/resource_providers", "http://127.0.0.1:30500/v3")
	})

	t.Run("glance", func(t *testing.T) {
		data := t.TempDir()
		store := filepath.Join(data, "images")
		conf := func(port int, flavor string) map[string]any {
			return map[string]any{"conf": map[string]any{"glance": map[string]any{
				"DEFAULT":                 map[string]any{"bind_host": "127.0.0.1", "bind_port": port},
				"database":                map[string]any{"connection": "sqlite:///" + filepath.Join(data, "glance.db")},
				"file":                    map[string]any{"filesystem_store_datadir": store + "/"},
				"os_glance_staging_store": map[string]any{"filesystem_store_datadir": store + "/.staging/"},
				"os_glance_tasks_store":   map[string]any{"filesystem_store_datadir": store + "/.tasks/"},
				"paste_deploy":            map[string]any{"config_file": filepath.Join(root, "usr/share/glance-common/glance-api-paste.ini"), "flavor": flavor},
			}}}
		}
		if err := os.Mkdir(store, 0o750); err != nil {
			t.Fatal(err)
		}
		for i, flavor := range []string{"keystone", ""} {
			port := freePort(t)
			objs, _, _ := renderAPI(t, "glance", overrides("glance", conf(port, flavor)))
			dir, _ := runConfigRender(t, containerByName(objs.job.Spec.Template.Spec.InitContainers, "config-render"), objs.secrets[0].StringData)
			if i == 0 {
				runStep(t, objs.job.Spec.Template.Spec, "db-sync", dir, program, env)
			}
			api := containerByName(objs.deployment.Spec.Template.Spec.Containers, "glance-api")
			logf := filepath.Join(data, fmt.Sprintf("glance-api-%d.log", i))
			stop := start(t, hostArgs(t, *api, dir, program), env, logf)
			base := fmt.Sprintf("http://127.0.0.1:%d", port)
			if resp := waitProbe(t, base, *api.ReadinessProbe, logf); resp.body != "OK" {
				t.Errorf("GET %s = %q, want OK", api.ReadinessProbe.HTTPGet.Path, resp.body)
			}
			if flavor == "keystone" {
				checkUnauthorized(t, base+"/v2/images", "http://127.0.0.1:30500/v3")
			} else {
				uploadImage(t, base, store)
			}
			stop()
		}
		for _, d := range []string{".staging", ".tasks"} {
			if fi, err := os.Stat(filepath.Join(store, d)); err != nil || !fi.IsDir() {
				t.Errorf("glance did not make its reserved store %s in the image volume: %v", d, err)
			}
		}
	})
}

func overrides(svc string, o map[string]any) deploy.DeploymentSpec {
	return deploy.DeploymentSpec{Images: testImages, Services: map[string]deploy.ServiceSpec{svc: {Overrides: o}}}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// hostArgs maps a container's command to the package tree: its program from programs, and
// every config file mount path (subPath of the config volume) to the rendered file.
func hostArgs(t *testing.T, c corev1.Container, conf string, programs func(string) []string) []string {
	t.Helper()
	paths := map[string]string{}
	for _, m := range c.VolumeMounts {
		if m.Name == "config" {
			paths[m.MountPath] = filepath.Join(conf, m.SubPath)
		}
	}
	args := programs(c.Command[0])
	for _, a := range c.Command[1:] {
		if p, ok := paths[a]; ok {
			a = p
		} else if strings.HasPrefix(a, "/etc/") {
			t.Fatalf("%s argument %s is a path no config mount provides", c.Name, a)
		}
		args = append(args, a)
	}
	return args
}

// runStep runs a Job step (a command with the rendered config files) to completion.
func runStep(t *testing.T, pod corev1.PodSpec, name, conf string, programs func(string) []string, env []string) {
	t.Helper()
	c := containerByName(pod.InitContainers, name)
	if c == nil {
		t.Fatalf("Job has no step %s", name)
	}
	args := hostArgs(t, *c, conf, programs)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = env
	began := time.Now()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s (%v): %v\n%s", name, c.Command, err, tail(string(b), 20))
	}
	t.Logf("%s %v: %s", name, c.Command, time.Since(began).Round(100*time.Millisecond))
}

// start runs a server in its own process group, stopped (SIGTERM, then SIGKILL) by the
// returned function and at cleanup.
func start(t *testing.T, args, env []string, logFile string) func() {
	t.Helper()
	log, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); log.Close(); close(done) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Errorf("%s ignored SIGTERM for 15 s", args[0])
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	t.Cleanup(stop)
	return stop
}

type response struct {
	status int
	header http.Header
	close  bool // the server sent "Connection: close" (net/http removes the header)
	body   string
}

func get(url string) (response, error) {
	c := http.Client{Timeout: 10 * time.Second}
	r, err := c.Get(url)
	if err != nil {
		return response{}, err
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	return response{status: r.StatusCode, header: r.Header, close: r.Close, body: string(b)}, err
}

// waitProbe polls the probe's path as the kubelet would until it answers 2xx.
func waitProbe(t *testing.T, base string, p corev1.Probe, logFile string) response {
	t.Helper()
	if p.HTTPGet == nil {
		t.Fatalf("probe %+v is not an HTTP GET", p)
	}
	began := time.Now()
	for time.Since(began) < 90*time.Second {
		if r, err := get(base + p.HTTPGet.Path); err == nil && r.status >= 200 && r.status < 300 {
			t.Logf("GET %s answered %d after %s", p.HTTPGet.Path, r.status, time.Since(began).Round(100*time.Millisecond))
			return r
		}
		time.Sleep(250 * time.Millisecond)
	}
	b, _ := os.ReadFile(logFile)
	t.Fatalf("GET %s%s did not answer 2xx in 90 s; log:\n%s", base, p.HTTPGet.Path, tail(string(b), 30))
	return response{}
}

func checkUnauthorized(t *testing.T, url, authURI string) {
	t.Helper()
	r, err := get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	if r.status != http.StatusUnauthorized || !strings.Contains(r.header.Get("WWW-Authenticate"), authURI) {
		t.Errorf("GET %s without a token = %d WWW-Authenticate %q, want 401 naming %s", url, r.status, r.header.Get("WWW-Authenticate"), authURI)
	}
}

// uploadImage creates an image, uploads 1 MiB and checks it lands in the file store and
// comes back unchanged (noauth pipeline: roles from headers).
func uploadImage(t *testing.T, base, store string) {
	t.Helper()
	do := func(method, path, ctype string, body []byte) response {
		req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", ctype)
		req.Header.Set("X-Roles", "admin")
		req.Header.Set("X-Tenant-Id", "osd-test")
		r, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return response{status: r.StatusCode, header: r.Header, body: string(b)}
	}
	r := do("POST", "/v2/images", "application/json", []byte(`{"name":"osd-test","disk_format":"raw","container_format":"bare"}`))
	var image struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(r.body), &image); r.status != http.StatusCreated || err != nil || image.ID == "" {
		t.Fatalf("POST /v2/images = %d %s, want 201 with an id", r.status, r.body)
	}
	id := image.ID
	blob := make([]byte, 1<<20)
	for i := range blob {
		blob[i] = byte(i * 7)
	}
	if r := do("PUT", "/v2/images/"+id+"/file", "application/octet-stream", blob); r.status != http.StatusNoContent {
		t.Fatalf("PUT image data = %d %s, want 204", r.status, r.body)
	}
	if got, err := os.ReadFile(filepath.Join(store, id)); err != nil || !bytes.Equal(got, blob) {
		t.Errorf("file store %s/%s = %d bytes (%v), want the uploaded 1 MiB", store, id, len(got), err)
	}
	if r := do("GET", "/v2/images/"+id+"/file", "", nil); r.status != http.StatusOK || r.body != string(blob) {
		t.Errorf("GET image data = %d, %d bytes, want 200 and the uploaded bytes", r.status, len(r.body))
	}
}

// apiPackages are the Debian packages TestAPIChartsWithDebianPackages runs.
var apiPackages = []string{"python3-placement", "python3-glance", "glance-common", "glance-api",
	"python3-keystonemiddleware", "python3-pymysql", "python3-memcache", "uwsgi-core", "uwsgi-plugin-python3"}

// debianPkgRoot returns a directory with pkgs and the packages of their dependency closure
// that the host has not installed, extracted with dpkg-deb (nothing is installed). They are
// resolved and downloaded with osd's private apt state (images.AptDir, as the image
// builder does, from the host's sources) under the cache directory, and the directory is
// reused while the set of packages and versions stays the same. Needs root (the cache).
func debianPkgRoot(t *testing.T, pkgs []string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("preparing the Debian packages in the cache directory needs root: run the tests as root, or set OSD_CHARTS_PKGROOT (see the test comment)")
	}
	for _, tool := range []string{"apt-get", "dpkg-deb", "dpkg-query"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: %v", tool, err)
		}
	}
	base := filepath.Join(cacheDir(), "charts-test")
	srcs, err := images.HostSources(images.DefaultSuite)
	if err != nil {
		t.Fatalf("apt sources for %s: %v", images.DefaultSuite, err)
	}
	apt := images.AptDir{Dir: filepath.Join(base, "apt", images.DefaultSuite), Sources: srcs, MaxAge: 24 * time.Hour}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	vers, err := apt.Resolve(ctx, nil, pkgs)
	if err != nil {
		t.Fatalf("resolve %v: %v", pkgs, err)
	}
	out, err := exec.Command("dpkg-query", "-W", "-f", "${Package} ${db:Status-Abbrev}\n").Output()
	if err != nil {
		t.Fatalf("dpkg-query: %v", err)
	}
	installed := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) == 2 && strings.HasPrefix(f[1], "ii") {
			installed[f[0]] = true
		}
	}
	want := map[string]string{}
	var lines []string
	for n, v := range vers {
		if !installed[n] || slices.Contains(pkgs, n) { // the packages themselves always
			want[n] = v
			lines = append(lines, n+"="+v)
		}
	}
	slices.Sort(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	root := filepath.Join(base, "pkgroot-"+hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(filepath.Join(root, ".complete")); err == nil {
		return root
	}
	began := time.Now()
	debs, err := apt.Download(ctx, filepath.Join(base, "debs"), want)
	if err != nil {
		t.Fatalf("download %d packages: %v", len(want), err)
	}
	old, _ := filepath.Glob(filepath.Join(base, "pkgroot-*")) // other package versions
	for _, o := range old {
		if err := os.RemoveAll(o); err != nil {
			t.Fatal(err)
		}
	}
	tmp := root + ".tmp"
	for _, deb := range debs {
		if b, err := exec.Command("dpkg-deb", "-x", deb, tmp).CombinedOutput(); err != nil {
			t.Fatalf("dpkg-deb -x %s: %v\n%s", deb, err, b)
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, ".complete"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, root); err != nil {
		t.Fatal(err)
	}
	t.Logf("extracted %d packages the host lacks into %s in %s", len(want), root, time.Since(began).Round(time.Second))
	return root
}
