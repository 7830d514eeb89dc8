package deploy

import (
	"bufio"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Crash is what is known of a container that keeps failing: where it runs, where its
// release keeps its data on the host, and the last lines of its log.
type Crash struct {
	Release   string // Helm release (label app.kubernetes.io/instance)
	Namespace string
	Pod       string
	Container string
	Node      string // node the pod is bound to ("" when not scheduled)
	DataDir   string // host path of the pod's "data" volume ("" when it is not a hostPath)
	Log       string // the container's last log lines
}

// Diagnosis names a known way a stateful service fails to start after an unclean stop or
// disk trouble: the log line that shows it and what to do about it.
type Diagnosis struct {
	Cause  string // the telling log line, prefixes (time, level) removed
	Remedy string // what to run, what it costs, what to do after
}

// crashRule recognises one failure: Pattern is matched against each log line of the given
// release's container (a prefix of its name).
type crashRule struct {
	release, container string
	pattern            *regexp.Regexp
	remedy             func(Crash) string
}

// The rules, most specific first. Every pattern is a line the daemon printed when the
// failure was reproduced with Debian 12's packages (testdata/crashlogs).
var crashRules = []crashRule{
	{"mariadb", "mariadb", regexp.MustCompile(`error 28\b|Errcode: 28|No space left on device|Probably out of disk space`), diskFull},
	{"mariadb", "mariadb", regexp.MustCompile(`Errcode: 30|Read-only file system`), readOnly},
	{"mariadb", "mariadb", regexp.MustCompile(`InnoDB: (Invalid log header checksum|Missing FILE_CHECKPOINT|ib_logfile0 is empty|File \./ib_logfile0 was not found|Log scan aborted)`), innodbRedo},
	{"mariadb", "mariadb", regexp.MustCompile(`InnoDB: (Inconsistent tablespace ID|Cannot apply log to|Plugin initialization aborted)`), innodbPages},
	{"mariadb", "mariadb", regexp.MustCompile(`Aria engine: log initialization failed|aria control file|Aria recovery failed`), ariaLog},
	{"mariadb", "mariadb", regexp.MustCompile(`Can't open and lock privilege tables`), privilegeTables},
	{"rabbitmq", "rabbitmq", regexp.MustCompile(`Cannot read schema|not_a_dets_file|mnesia_app,start|unknown_wal_file_format`), rabbitStore},
	{"ovn", "ovsdb-sb", regexp.MustCompile(ovsdbDamaged), ovsdbSouthbound},
	{"ovn", "ovsdb-nb", regexp.MustCompile(ovsdbDamaged), ovsdbNorthbound},
}

// ovsdbDamaged: what ovsdb-tool and ovsdb-server say, as their fatal error (prefixed with
// the program's name), of a database file whose header or schema record is unreadable. A
// torn last transaction is only logged ("|ovsdb_server|ERR|I/O error: ...") and the rest
// of the file is served: not a failure.
const ovsdbDamaged = `^ovsdb-(tool|server): (ovsdb error: \S+: (unexpected file format|cannot identify file type)|I/O error: \S+: error reading \d+ bytes starting at offset|syntax error: \S+: \d+ bytes starting at offset \d+ have SHA-1 hash)`

var (
	// A line that starts as a sentence (not a piece of an Erlang term).
	plainText = regexp.MustCompile(`^[A-Za-z]`)
	// "2026-11-24  4:43:02 0 [ERROR] " (mariadbd), "2026-11-24 05:00:02.989143+00:00 [error] <0.241.0> "
	// (RabbitMQ), "2026-11-24T05:01:26Z|00001|ovsdb_server|ERR|" (Open vSwitch).
	logPrefix = regexp.MustCompile(`^(\d{4}-\d\d-\d\d\s+\d{1,2}:\d\d:\d\d \d+ \[\w+\] |\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+[+-]\d\d:\d\d \[\w+\] <[\d.]+> |\d{4}-\d\d-\d\dT[\d:.]+Z\|\d+\|\w+\|\w+\|)`)
)

// Diagnose recognises a known start failure of MariaDB, RabbitMQ or the OVN databases in
// a failing container's log and says what to do; false for other releases and unknown logs.
func Diagnose(c Crash) (Diagnosis, bool) {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(c.Log))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, strings.TrimSpace(ansiEscape.ReplaceAllString(sc.Text(), "")))
	}
	for _, r := range crashRules {
		if r.release != c.Release || !strings.HasPrefix(c.Container, r.container) {
			continue
		}
		for _, l := range lines {
			if m := r.pattern.FindString(l); m != "" {
				cause := strings.TrimSpace(logPrefix.ReplaceAllString(l, ""))
				if !plainText.MatchString(cause) || len(cause) > 200 { // a piece of an Erlang term
					cause = strings.Trim(m, ` ,{"`)
				}
				return Diagnosis{Cause: cause, Remedy: r.remedy(c)}, true
			}
		}
	}
	return Diagnosis{}, false
}

// CrashOf gathers what Diagnose needs from a pod, one of its containers and its log tail.
func CrashOf(p corev1.Pod, container, log string) Crash {
	c := Crash{Release: p.Labels["app.kubernetes.io/instance"], Namespace: p.Namespace, Pod: p.Name,
		Container: container, Node: p.Spec.NodeName, Log: log}
	if c.Namespace == "" {
		c.Namespace = Namespace
	}
	for _, v := range p.Spec.Volumes {
		if v.Name == "data" && v.HostPath != nil {
			c.DataDir = v.HostPath.Path
		}
	}
	return c
}

// where is "on node N, " when the pod is bound to a node: the data is on that host.
func (c Crash) where() string {
	if c.Node == "" {
		return ""
	}
	return "on node " + c.Node + ", "
}

func (c Crash) dir() string {
	if c.DataDir == "" {
		return "the data directory"
	}
	return c.DataDir
}

func (c Crash) kubectl(args string) string {
	return fmt.Sprintf("osd kubectl -n %s %s", c.Namespace, args)
}

func (c Crash) restart() string { return c.kubectl("delete pod " + c.Pod) }

func diskFull(c Crash) string {
	return fmt.Sprintf("The filesystem holding %s is full: %sfree space on it (df -h %s shows it), then restart the pod: %s. Nothing is lost.",
		c.dir(), c.where(), c.dir(), c.restart())
}

func readOnly(c Crash) string {
	return fmt.Sprintf("The filesystem holding %s is read-only (the kernel remounts a filesystem read-only after I/O errors: see dmesg): %scheck and repair it (fsck), mount it read-write again, then restart the pod: %s. Nothing is lost unless the repair finds damage.",
		c.dir(), c.where(), c.restart())
}

// mariadbRestore is the hand recovery of a damaged MariaDB: back up, start with the given
// recovery options (read at start from osd-recovery-options in the data directory), dump
// what is readable, start afresh and restore the dump. The dump connects as root with the
// chart's password over loopback, or, when the options skip the grant tables (and the
// network), through the socket with no account.
func mariadbRestore(c Crash, what, options, levels string) string {
	d := c.dir()
	dump := `sh -c 'MYSQL_PWD="$ROOT_PASSWORD" exec mariadb-dump -h127.0.0.1 -uroot --all-databases --force --flush-privileges'`
	if strings.Contains(options, "--skip-grant-tables") {
		dump = "mariadb-dump --all-databases --force --flush-privileges"
	}
	return fmt.Sprintf("%s; osd never discards a database by itself. Recover by hand (%sthe server is not running while it crash-loops): "+
		"1) back up: cp -a %s %s.backup-$(date +%%Y%%m%%d%%H%%M%%S); "+
		"2) start it in recovery mode: echo '%s' > %s/osd-recovery-options && %s%s; "+
		"3) once it runs, dump what is readable: %s > mariadb-dump.sql (tables it cannot read are reported and skipped: their rows are lost, the rest is kept); "+
		"4) start afresh and restore: mv %s %s.damaged-$(date +%%Y%%m%%d%%H%%M%%S) && %s, wait until it is ready, then %s < mariadb-dump.sql; "+
		"then osd status shows the services coming back.",
		what, c.where(), d, d, options, d, c.restart(), levels,
		c.kubectl("exec "+c.Pod+" -c "+c.Container+" -- "+dump),
		d, d, c.restart(), c.kubectl("exec -i "+c.Pod+" -c "+c.Container+` -- sh -c 'MYSQL_PWD="$ROOT_PASSWORD" exec mariadb -h127.0.0.1 -uroot'`))
}

func innodbRedo(c Crash) string {
	return mariadbRestore(c, "MariaDB's InnoDB redo log (ib_logfile0) is damaged, so InnoDB cannot replay it",
		"--innodb-force-recovery=6", " (level 6 starts without the redo log: changes committed just before the stop may be missing)")
}

func innodbPages(c Crash) string {
	return mariadbRestore(c, "MariaDB's InnoDB data files are damaged",
		"--innodb-force-recovery=1", " (if it still fails, raise the number one step at a time up to 6)")
}

func privilegeTables(c Crash) string {
	return mariadbRestore(c, "A MariaDB system table (mysql.*) is damaged",
		"--skip-grant-tables --skip-networking", " (no passwords are checked in this mode, so it takes no network connections)")
}

func ariaLog(c Crash) string {
	d := c.dir()
	return fmt.Sprintf("MariaDB's Aria crash-recovery log is damaged. %smove it aside: a=%s/aria-log.aside-$(date +%%Y%%m%%d%%H%%M%%S); mkdir \"$a\" && mv %s/aria_log_control %s/aria_log.0* \"$a\", then restart the pod: %s. "+
		"Cost: changes to Aria tables not yet written when it stopped are lost (Aria holds MariaDB's own mysql.* tables; OpenStack's tables are InnoDB and keep their data). "+
		"After: %s.",
		c.where(), d, d, d, c.restart(), c.kubectl("exec "+c.Pod+" -c "+c.Container+` -- sh -c 'MYSQL_PWD="$ROOT_PASSWORD" exec mariadb-check -h127.0.0.1 -uroot --all-databases --auto-repair'`))
}

func rabbitStore(c Crash) string {
	d := c.dir()
	return fmt.Sprintf("RabbitMQ's database (%s/mnesia) cannot be read. Its start script moves it aside by itself after 3 failed starts in a row; to do it now, %srun: mv %s/mnesia %s/mnesia.broken-$(date +%%Y%%m%%d%%H%%M%%S) && %s. "+
		"Cost: the queued messages (OpenStack's RPC messages in flight, retried by the services); users and permissions are re-created at start and the services declare their queues again when they reconnect.",
		d, c.where(), d, d, c.restart())
}

func ovsdbSouthbound(c Crash) string {
	d := c.dir()
	return fmt.Sprintf("The OVN southbound database (%s/ovnsb_db.db) is damaged. Its start script moves an unreadable file aside by itself; if this persists, %srun: mv %s/ovnsb_db.db %s/ovnsb_db.db.corrupt-$(date +%%Y%%m%%d%%H%%M%%S) && %s. "+
		"Nothing is lost: ovn-northd rebuilds it from the northbound database and ovn-controller registers its chassis again.",
		d, c.where(), d, d, c.restart())
}

func ovsdbNorthbound(c Crash) string {
	d := c.dir()
	return fmt.Sprintf("The OVN northbound database (%s/ovnnb_db.db), the logical network Neutron wrote, is damaged. %smove it aside: mv %s/ovnnb_db.db %s/ovnnb_db.db.corrupt-$(date +%%Y%%m%%d%%H%%M%%S) && %s (an empty one is created at start), "+
		"then make Neutron write the logical network again from its own database: %s. "+
		"Nothing is lost (Neutron's database holds the networks); instances lose connectivity until the sync ends.",
		d, c.where(), d, d, c.restart(),
		c.kubectl("exec deploy/neutron-server -c neutron-server -- neutron-ovn-db-sync-util --config-file /etc/neutron/neutron.conf --config-file /etc/neutron/plugins/ml2/ml2_conf.ini --ovn-neutron_sync_mode repair"))
}
