package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// TestSnapPackage inspects the snap make snap built: a squashfs with meta/snap.yaml, the
// hooks and the binary; the binary taken out of it runs; the hooks use only commands and
// flags the osd CLI has; the service passes `snap set` options to osd daemon.
func TestSnapPackage(t *testing.T) {
	if testing.Short() {
		t.Skip("package test skipped in -short mode")
	}
	requireTools(t, "unsquashfs", "snap")
	s := artifact(t, "OSD_SNAP", "snap", "snap")
	list := run(t, time.Minute, nil, "unsquashfs", "-l", s)
	for _, p := range []string{"meta/snap.yaml", "meta/hooks/install", "meta/hooks/configure", "meta/hooks/remove",
		"meta/hooks/pre-refresh", "bin/osd", "bin/osd-service", "usr/share/bash-completion/completions/osd"} {
		if !strings.Contains(list, "squashfs-root/"+p+"\n") {
			t.Errorf("unsquashfs -l %s: no %s", filepath.Base(s), p)
		}
	}
	dir := filepath.Join(t.TempDir(), "snap")
	run(t, 5*time.Minute, nil, "unsquashfs", "-q", "-d", dir, s)

	var meta struct {
		Name, Version, Confinement string
		Environment                map[string]string
		Apps                       map[string]map[string]any
	}
	if err := yaml.Unmarshal([]byte(readFile(t, filepath.Join(dir, "meta/snap.yaml"))), &meta); err != nil {
		t.Fatalf("meta/snap.yaml: %v", err)
	}
	osdVersion := strings.TrimSpace(run(t, time.Minute, nil, filepath.Join(dir, "bin/osd"), "--version"))
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"name", meta.Name, "osd"},
		{"confinement", meta.Confinement, "classic"},
		{"apps.osd.command", meta.Apps["osd"]["command"], "bin/osd"},
		{"apps.daemon.command", meta.Apps["daemon"]["command"], "bin/osd-service"},
		{"apps.daemon.daemon", meta.Apps["daemon"]["daemon"], "notify"},
		{"apps.daemon.stop-mode", meta.Apps["daemon"]["stop-mode"], "sigterm"},
		{"environment.OSD_STATE_DIR", meta.Environment["OSD_STATE_DIR"], "$SNAP_COMMON/state"},
	} {
		if c.got != c.want {
			t.Errorf("meta/snap.yaml %s = %v, want %v", c.what, c.got, c.want)
		}
	}
	if !strings.HasPrefix(osdVersion, "osd ") || !strings.Contains(filepath.Base(s), "_"+meta.Version+"_") {
		t.Errorf("snap version %q, file %s, binary says %q: want them to agree", meta.Version, filepath.Base(s), osdVersion)
	}
	out := run(t, time.Minute, []string{"OSD_RUN_DIR=" + t.TempDir()}, filepath.Join(dir, "bin/osd"), "version")
	if !strings.Contains(out, "client: ") {
		t.Errorf("bin/osd version from the snap = %q", out)
	}

	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().Perm()&0o004 == 0 {
			t.Errorf("%s is not world-readable (snapd refuses the snap)", strings.TrimPrefix(p, dir))
		}
		return nil
	})
	run(t, time.Minute, nil, "snap", "pack", "--check-skeleton", dir)

	t.Run("hooks use the osd CLI", func(t *testing.T) {
		hooks, _ := filepath.Glob(filepath.Join(dir, "meta/hooks/*"))
		for _, h := range append(hooks, filepath.Join(dir, "bin/osd-service")) {
			run(t, time.Minute, nil, "sh", "-n", h)
			for _, line := range strings.Split(readFile(t, h), "\n") {
				line = strings.TrimSpace(line)
				if !strings.HasPrefix(line, `"$SNAP/bin/osd" `) {
					continue
				}
				args := strings.Fields(strings.TrimPrefix(line, `"$SNAP/bin/osd" `))
				if len(args) > 0 && args[0] == "--version" {
					continue
				}
				// --help parses the same command line: an unknown flag fails, and the usage
				// names the command it found (an unknown word would be taken as an argument).
				var words []string
				for _, a := range args {
					if strings.HasPrefix(a, "-") {
						break
					}
					words = append(words, a)
				}
				usage := "osd " + strings.Join(words, " ") + " [flags]"
				if out, err := runErr(time.Minute, nil, filepath.Join(dir, "bin/osd"), append(args, "--help")...); err != nil || !strings.Contains(out, usage) {
					t.Errorf("%s runs osd %s, which the CLI does not know (want usage %q): %v\n%s", filepath.Base(h), strings.Join(args, " "), usage, err, out)
				}
			}
		}
	})

	t.Run("service passes the options", func(t *testing.T) {
		// snapctl exists only where snapd runs: a stand-in answers `snapctl get KEY`, and a
		// stand-in osd prints the command line the service would run.
		fake := t.TempDir()
		os.MkdirAll(filepath.Join(fake, "bin"), 0o755)
		os.WriteFile(filepath.Join(fake, "snapctl"), []byte("#!/bin/sh\ncase \"$2\" in https-address) echo none;; debug) echo true;; node-ip) echo 10.0.0.5;; esac\n"), 0o755)
		os.WriteFile(filepath.Join(fake, "bin/osd"), []byte("#!/bin/sh\necho \"$@\"\n"), 0o755)
		out := run(t, time.Minute, []string{"PATH=" + fake + ":" + os.Getenv("PATH"), "SNAP=" + fake, "SNAP_COMMON=/var/snap/osd/common"},
			"sh", filepath.Join(dir, "bin/osd-service"))
		want := "daemon --cache-dir /var/snap/osd/common/cache --https-address none --node-ip 10.0.0.5 --debug"
		if strings.TrimSpace(out) != want {
			t.Errorf("the snap's service runs osd %q, want osd %q", strings.TrimSpace(out), want)
		}
	})
}
