package main

import "github.com/spf13/cobra"

// helpTopics are `osd help TOPIC` pages (and osd-TOPIC(1) man pages): commands with no
// action, which cobra lists as additional help topics.
func helpTopics() []*cobra.Command {
	return []*cobra.Command{
		{
			Use:   "paths",
			Short: "Where osd keeps its state, sockets, logs and cache",
			Long: `Where osd keeps its state, sockets, logs and cache.

  /var/lib/osd (--state-dir, env OSD_STATE_DIR)
      osd.db               the daemon's SQLite state: journal, host settings, members
      osd.db.pre-upgrade   the state database as it was before the last package upgrade
      k3s/                 the embedded Kubernetes (its datastore is SQLite through kine)
      kubeconfig           Kubernetes admin credentials (0600)
      clouds.yaml, admin-openrc   OpenStack admin credentials (0600)
      containerd/          containerd's configuration and image store
      volumes/             MariaDB, RabbitMQ, Glance and OVN data
      cluster/             the cluster CA and server certificate
      bin/                 containerd, kubectl, ctr, crictl: links to the osd binary
      logs/                k3s.log, containerd.log, daemon.log (without systemd)
  /run/osd (--run-dir, env OSD_RUN_DIR)
      osd.sock             the REST API, root only
  /var/cache/osd (osd daemon --cache-dir)
      built images and downloaded packages; osd reset and a package purge keep it
  /var/lib/nova            instance disks, written by nova-compute

The snap keeps the same tree under /var/snap/osd/common (state/, cache/) and its
sockets in /run/snap.osd.

osd reset removes the state and run dirs and everything osd changed on the host.
Removing the .deb stops the daemon and keeps /var/lib/osd; purging it deletes
/var/lib/osd too (run osd reset first to undo the host changes).`,
		},
		{
			Use:   "environment",
			Short: "Environment variables osd reads",
			Long: `Environment variables osd reads.

  OSD_STATE_DIR     default of --state-dir (/var/lib/osd)
  OSD_RUN_DIR       default of --run-dir (/run/osd)
  OSD_CGROUP_ROOT   default of osd daemon --cgroup-root (the kubelet's cgroup root)
  OSD_SERVICE_UNIT  the systemd unit that runs the daemon for this state dir; without
                    it, osd.service runs the daemon of the default state dir when it
                    is installed (the snap sets snap.osd.daemon.service)
  NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID
                    set by systemd for osd.service (Type=notify): the daemon says
                    READY=1 once its API answers and pings the watchdog while the
                    API keeps answering; it takes them out of its environment so
                    that no embedded component or child speaks for it`,
		},
		{
			Use:   "upgrades",
			Short: "How package upgrades keep the cloud running, and why downgrades are refused",
			Long: `How package upgrades keep the cloud running, and why downgrades are refused.

Installing a newer osd package over a running cloud runs
  osd daemon restart --if-running --keep-workloads --backup-state
which stops the daemon without stopping the pods (guests run in libvirt and keep
running in any case), copies the state database to STATE-DIR/osd.db.pre-upgrade,
and starts the new daemon. The new daemon updates the database schema (backing the
file up to osd.db.bak first when there is an update to apply), finds the pods where
the old one left them, converges the host again, renders every service's values
and upgrades only the Helm releases whose values changed. osd status shows the
daemon's version.

A package older than the installed one is refused while /var/lib/osd holds a
cloud: the newer daemon may have moved the state to a schema the older one cannot
read (an older daemon refuses such a database and says so). To go back, remove the
cloud first (osd reset), or restore osd.db.pre-upgrade yourself.

osd daemon stop ends the pods with the daemon unless given --keep-workloads;
systemctl stop osd does the same as osd daemon stop.`,
		},
	}
}
