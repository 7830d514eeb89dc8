package charts

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/osdcloud/osd/daemon/deploy"
)

// ovsdbSchema is the schema the OVSDB recovery test creates its files with: OVN's when
// installed, else Open vSwitch's own (the start script's checks are about the file
// format, the same for any schema).
func ovsdbSchema(t *testing.T, db string) string {
	for _, p := range []string{"/usr/share/ovn/ovn-" + db + ".ovsschema", "/usr/share/openvswitch/vswitch.ovsschema"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("no OVSDB schema installed (ovn-common or openvswitch-common)")
	return ""
}

// ovsdbRun runs the ovn-central start script of database db ("nb" or "sb") with the real
// ovsdb-tool and ovsdb-server on files under dir (a unix socket and a loopback port
// only). It returns the script's output and whether ovsdb-server came to serve the file.
func ovsdbRun(t *testing.T, dir, db, schema string) (string, bool) {
	t.Helper()
	_, typed := renderService(t, "ovn", deploy.DeploymentSpec{Images: testImages})
	c := containerByName(typed["Deployment/ovn-central"].(*appsv1.Deployment).Spec.Template.Spec.Containers, "ovsdb-"+db)
	script := strings.NewReplacer("/var/lib/ovn", filepath.Join(dir, "data"), "/run/ovn", filepath.Join(dir, "run"),
		"/usr/share/ovn/ovn-"+db+".ovsschema", schema, "pssl:6641:0.0.0.0", "ptcp:0:127.0.0.1", "pssl:16642:0.0.0.0", "ptcp:0:127.0.0.1",
		"db:OVN_Southbound,SB_Global,connections", "ptcp:0:127.0.0.1", "/etc/ovn/tls", filepath.Join(dir, "tls")).Replace(c.Command[2])
	var out bytes.Buffer
	cmd := exec.Command("sh", "-ec", script)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}()
	sock := "unix:" + filepath.Join(dir, "run", "ovn"+db+"_db.sock")
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		select {
		case <-exited:
			exited <- nil // for the deferred wait
			return out.String(), false
		default:
		}
		if err := exec.Command("ovsdb-client", "--timeout=2", "list-dbs", sock).Run(); err == nil {
			return out.String(), true
		}
	}
	t.Fatalf("ovsdb-%s neither served nor exited in 15 s:\n%s", db, out.String())
	return "", false
}

// TestOVSDBStartRecovery damages OVN database files as an unclean stop or a bad disk
// does and runs the chart's start script with the real ovsdb-tool and ovsdb-server: an
// unreadable southbound file is moved aside (kept, renamed) and a new one served; an
// unreadable northbound file is left alone and the container fails with the line status
// explains (deploy.Diagnose); a torn last record is served as is.
func TestOVSDBStartRecovery(t *testing.T) {
	for _, tool := range []string{"ovsdb-tool", "ovsdb-server", "ovsdb-client", "sh"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (Debian's openvswitch-common has the OVSDB tools): %v", tool, err)
		}
	}
	garbleHeader := func(t *testing.T, f string) {
		fh, err := os.OpenFile(f, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		if _, err := fh.WriteAt([]byte("\x8f\x02garbage after a bad disk write\x00\x17"), 0); err != nil {
			t.Fatal(err)
		}
	}
	tornTail := func(t *testing.T, f string) {
		fh, err := os.OpenFile(f, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		if _, err := fh.WriteString("OVSDB JSON 200 0123456789012345678901234567890123456789\n{\"x\":"); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name, db  string
		damage    func(*testing.T, string)
		served    bool // ovsdb-server serves a database afterwards
		movedAway bool // the damaged file was renamed .corrupt-<time>
	}{
		{"southbound header", "sb", garbleHeader, true, true},
		{"northbound header", "nb", garbleHeader, false, false},
		{"southbound torn last record", "sb", tornTail, true, false},
		{"northbound torn last record", "nb", tornTail, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			schema := ovsdbSchema(t, tt.db)
			for _, d := range []string{"data", "run"} {
				if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			file := filepath.Join(dir, "data", "ovn"+tt.db+"_db.db")
			if out, err := exec.Command("ovsdb-tool", "create", file, schema).CombinedOutput(); err != nil {
				t.Fatalf("ovsdb-tool create: %v\n%s", err, out)
			}
			tt.damage(t, file)
			damaged, _ := os.ReadFile(file)
			out, served := ovsdbRun(t, dir, tt.db, schema)
			if served != tt.served {
				t.Fatalf("ovsdb-%s served = %v, want %v; output:\n%s", tt.db, served, tt.served, out)
			}
			asides, _ := filepath.Glob(file + ".corrupt-*")
			if got := len(asides) == 1; got != tt.movedAway {
				t.Fatalf("moved aside = %v (%v), want %v; output:\n%s", got, asides, tt.movedAway, out)
			}
			if tt.movedAway {
				if kept, _ := os.ReadFile(asides[0]); !bytes.Equal(kept, damaged) {
					t.Errorf("the file moved aside differs from the damaged one (%d bytes, want %d)", len(kept), len(damaged))
				}
				if !strings.Contains(out, "osd: the southbound database cannot be read: moved it aside to "+asides[0]) {
					t.Errorf("output lacks the line saying where the file went:\n%s", out)
				}
			}
			if !served {
				if now, _ := os.ReadFile(file); !bytes.Equal(now, damaged) {
					t.Errorf("the northbound file was changed; it must be left for a human")
				}
				d, ok := deploy.Diagnose(deploy.Crash{Release: "ovn", Namespace: "openstack", Pod: "ovn-central-x", Container: "ovsdb-" + tt.db,
					DataDir: "/var/lib/osd/volumes/ovn", Log: out})
				if !ok || !strings.Contains(d.Remedy, "neutron-ovn-db-sync-util") {
					t.Errorf("Diagnose(output) = %+v, %v, want the northbound remedy; output:\n%s", d, ok, out)
				}
			}
		})
	}
}
