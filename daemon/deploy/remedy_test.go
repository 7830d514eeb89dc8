package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The logs under testdata/crashlogs were printed by Debian 12's mariadbd 10.11.19,
// RabbitMQ 3.10.8 (Erlang 25) and ovsdb-server/ovsdb-tool 3.1.0 when their files were
// damaged as each name says (README there tells how).
func crashLog(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "crashlogs", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// passwordArg is a password option of the MariaDB and RabbitMQ clients.
var passwordArg = regexp.MustCompile(`(^|\s)(-p\S|--password\b)`)

func TestDiagnose(t *testing.T) {
	const mdb, rmq, ovn = "/var/lib/osd/volumes/mariadb", "/var/lib/osd/volumes/rabbitmq", "/var/lib/osd/volumes/ovn"
	crash := func(release, pod, container, dir, log string) Crash {
		return Crash{Release: release, Namespace: "openstack", Pod: pod, Container: container, Node: "node1", DataDir: dir, Log: log}
	}
	maria := func(log string) Crash { return crash("mariadb", "mariadb-0", "mariadb", mdb, log) }
	tests := []struct {
		name   string
		crash  Crash
		cause  string   // "" = no diagnosis
		remedy []string // substrings of the remedy
	}{
		{"redo log header", maria(crashLog(t, "mariadb-redo-header-corrupt.log")), "InnoDB: Invalid log header checksum",
			[]string{"cp -a " + mdb + " " + mdb + ".backup-", "echo '--innodb-force-recovery=6' > " + mdb + "/osd-recovery-options && osd kubectl -n openstack delete pod mariadb-0",
				`osd kubectl -n openstack exec mariadb-0 -c mariadb -- sh -c 'MYSQL_PWD="$ROOT_PASSWORD" exec mariadb-dump -h127.0.0.1 -uroot --all-databases --force --flush-privileges' > mariadb-dump.sql`,
				"mv " + mdb + " " + mdb + ".damaged-",
				`osd kubectl -n openstack exec -i mariadb-0 -c mariadb -- sh -c 'MYSQL_PWD="$ROOT_PASSWORD" exec mariadb -h127.0.0.1 -uroot' < mariadb-dump.sql`, "on node node1", "never discards"}},
		{"redo log checkpoint", maria(crashLog(t, "mariadb-redo-checkpoint-missing.log")), "InnoDB: Missing FILE_CHECKPOINT(48084) at 48356", []string{"--innodb-force-recovery=6"}},
		{"redo log empty", maria(crashLog(t, "mariadb-redo-empty.log")), "InnoDB: ib_logfile0 is empty, and LSN is unknown.", []string{"--innodb-force-recovery=6"}},
		{"redo log missing", maria(crashLog(t, "mariadb-redo-missing.log")), "InnoDB: File ./ib_logfile0 was not found", []string{"--innodb-force-recovery=6"}},
		{"system tablespace", maria(crashLog(t, "mariadb-ibdata-corrupt.log")), "InnoDB: Inconsistent tablespace ID in ./ibdata1", []string{"--innodb-force-recovery=1", "up to 6"}},
		{"table file", maria(crashLog(t, "mariadb-table-corrupt.log")), "InnoDB: Inconsistent tablespace ID in ./nova/t.ibd", []string{"--innodb-force-recovery=1"}},
		{"aria control file", maria(crashLog(t, "mariadb-aria-control-corrupt.log")),
			"mariadbd: Got error 'Missing valid id at start of file. File is not a valid aria control file' when trying to use aria control file '/data/ariactl/aria_log_control'",
			[]string{"mv " + mdb + "/aria_log_control " + mdb + "/aria_log.0*", "MYSQL_PWD=\"$ROOT_PASSWORD\" exec mariadb-check -h127.0.0.1 -uroot --all-databases --auto-repair", "OpenStack's tables are InnoDB"}},
		{"aria log", maria(crashLog(t, "mariadb-aria-log-corrupt.log")), "mariadbd: Aria engine: log initialization failed", []string{"aria-log.aside-"}},
		{"privilege tables", maria(crashLog(t, "mariadb-privilege-table-corrupt.log")), "Fatal error: Can't open and lock privilege tables: Incorrect file format 'db'",
			[]string{"echo '--skip-grant-tables --skip-networking' > " + mdb + "/osd-recovery-options",
				"osd kubectl -n openstack exec mariadb-0 -c mariadb -- mariadb-dump --all-databases --force --flush-privileges > mariadb-dump.sql"}},
		{"disk full", maria(crashLog(t, "mariadb-disk-full.log")), "InnoDB: preallocating 12582912 bytes for file ./ibtmp1 failed with error 28",
			[]string{"The filesystem holding " + mdb + " is full", "df -h " + mdb, "Nothing is lost"}},
		{"read-only", maria(crashLog(t, "mariadb-read-only.log")), `Can't create test file '/data/ro/vm.lower-test' (Errcode: 30 "Read-only file system")`,
			[]string{"is read-only", "fsck"}},
		{"recovered after an unclean stop", maria(crashLog(t, "mariadb-unclean-stop-recovered.log")), "", nil},
		{"unknown mariadb line", maria("2026-11-24  4:44:41 0 [ERROR] mariadbd: unknown variable 'foo=1'\n2026-11-24  4:44:41 0 [ERROR] Aborting\n"), "", nil},
		{"other release", crash("keystone", "keystone-0", "keystone", "", crashLog(t, "mariadb-redo-header-corrupt.log")), "", nil},
		{"other container", crash("mariadb", "mariadb-0", "chown", mdb, crashLog(t, "mariadb-redo-header-corrupt.log")), "", nil},
		{"mnesia schema", crash("rabbitmq", "rabbitmq-0", "rabbitmq", rmq, crashLog(t, "rabbitmq-mnesia-schema-corrupt.log")), "Cannot read schema",
			[]string{"mv " + rmq + "/mnesia " + rmq + "/mnesia.broken-", "osd kubectl -n openstack delete pod rabbitmq-0", "after 3 failed starts"}},
		{"quorum wal", crash("rabbitmq", "rabbitmq-0", "rabbitmq", rmq, crashLog(t, "rabbitmq-quorum-wal-corrupt.log")), "unknown_wal_file_format", []string{rmq + "/mnesia.broken-"}},
		{"message store rebuilt", crash("rabbitmq", "rabbitmq-0", "rabbitmq", rmq, crashLog(t, "rabbitmq-message-store-rebuilt.log")), "", nil},
		{"nb bad header", crash("ovn", "ovn-central-7d9f", "ovsdb-nb", ovn, crashLog(t, "ovn-nb-bad-header.log")), "ovsdb-tool: ovsdb error: /var/lib/ovn/ovnnb_db.db: unexpected file format",
			[]string{"mv " + ovn + "/ovnnb_db.db " + ovn + "/ovnnb_db.db.corrupt-", "osd kubectl -n openstack delete pod ovn-central-7d9f", "neutron-ovn-db-sync-util", "--ovn-neutron_sync_mode repair"}},
		{"nb truncated", crash("ovn", "ovn-central-7d9f", "ovsdb-nb", ovn, crashLog(t, "ovn-nb-truncated.log")),
			"ovsdb-tool: I/O error: /var/lib/ovn/ovnnb_db.db: error reading 14445 bytes starting at offset 58 (End of file)", []string{"neutron-ovn-db-sync-util"}},
		{"nb checksum", crash("ovn", "ovn-central-7d9f", "ovsdb-nb", ovn, crashLog(t, "ovn-nb-checksum.log")), "", []string{"neutron-ovn-db-sync-util"}},
		{"nb torn tail is served", crash("ovn", "ovn-central-7d9f", "ovsdb-nb", ovn, crashLog(t, "ovn-nb-torn-tail-served.log")), "", nil},
		{"sb bad header", crash("ovn", "ovn-central-7d9f", "ovsdb-sb", ovn, crashLog(t, "ovn-sb-bad-header.log")), "ovsdb-tool: ovsdb error: /var/lib/ovn/ovnsb_db.db: unexpected file format",
			[]string{"mv " + ovn + "/ovnsb_db.db " + ovn + "/ovnsb_db.db.corrupt-", "ovn-northd rebuilds it"}},
		{"sb line in the nb container", crash("ovn", "ovn-central-7d9f", "northd", ovn, crashLog(t, "ovn-sb-bad-header.log")), "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ok := Diagnose(tt.crash)
			wantOK := tt.cause != "" || tt.remedy != nil
			if ok != wantOK {
				t.Fatalf("Diagnose(%s) = %+v, %v, want ok %v", tt.name, d, ok, wantOK)
			}
			if tt.cause != "" && d.Cause != tt.cause {
				t.Errorf("Diagnose(%s).Cause = %q, want %q", tt.name, d.Cause, tt.cause)
			}
			// A command a human pastes must not put a password in its arguments
			// (/proc/PID/cmdline is readable by every local user): environment only.
			if m := passwordArg.FindString(d.Remedy); m != "" {
				t.Errorf("Diagnose(%s).Remedy passes a password as an argument (%q): %s", tt.name, m, d.Remedy)
			}
			for _, w := range tt.remedy {
				if !strings.Contains(d.Remedy, w) {
					t.Errorf("Diagnose(%s).Remedy = %q, want it to contain %q", tt.name, d.Remedy, w)
				}
			}
		})
	}
}

func TestCrashOf(t *testing.T) {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "mariadb-0", Namespace: "openstack", Labels: map[string]string{"app.kubernetes.io/instance": "mariadb"}},
		Spec: corev1.PodSpec{NodeName: "n1", Volumes: []corev1.Volume{
			{Name: "run", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "data", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/osd/volumes/mariadb"}}}}}}
	got := CrashOf(p, "mariadb", "x")
	want := Crash{Release: "mariadb", Namespace: "openstack", Pod: "mariadb-0", Container: "mariadb", Node: "n1", DataDir: "/srv/osd/volumes/mariadb", Log: "x"}
	if got != want {
		t.Errorf("CrashOf() = %+v, want %+v", got, want)
	}
}

// TestPodsReasonRemedy: a crash-looping stateful service's reason carries the diagnosis and
// its remedy with the pod's real names and host path; another release's does not.
func TestPodsReasonRemedy(t *testing.T) {
	crashing := func(release string) corev1.Pod {
		return pod(release+"-0", 0, func(p *corev1.Pod) {
			p.Namespace = "openstack"
			p.Labels = map[string]string{"app.kubernetes.io/instance": release}
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/osd/volumes/" + release}}}}
			cs := waiting(release, "img", "CrashLoopBackOff")
			cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
		})
	}
	log := crashLog(t, "mariadb-redo-header-corrupt.log")
	got := PodsReason([]corev1.Pod{crashing("mariadb")}, Logs{{"mariadb-0", "mariadb", true}: log})
	for _, w := range []string{"pod mariadb-0: container mariadb crash-looping (exit code 1): InnoDB: Invalid log header checksum. MariaDB's InnoDB redo log",
		"/var/lib/osd/volumes/mariadb/osd-recovery-options"} {
		if !strings.Contains(got, w) {
			t.Errorf("PodsReason(mariadb) = %q, want it to contain %q", got, w)
		}
	}
	got = PodsReason([]corev1.Pod{crashing("keystone")}, Logs{{"keystone-0", "keystone", true}: log})
	if want := "pod keystone-0: container keystone crash-looping (exit code 1): 2026-11-24  4:43:02 0 [ERROR] Aborting"; got != want {
		t.Errorf("PodsReason(keystone) = %q, want %q", got, want)
	}
}
