# neutron-server with ML2/OVN in three processes instead of five.
#
# Usage: python3 -c <this program> --config-file /etc/neutron/neutron.conf --config-file ...
#
# Debian's neutron-server forks, under a parent that only waits: the API workers
# (api_workers), at least one RPC worker (rpc_workers 0 is raised to 1), the OVN
# MaintenanceWorker, and one more process for the plugins' in-thread workers (ML2's agent
# health check, the DHCP-agent failover check, the quota reservation cleanup, the
# ovn-router floating IP janitor). Each forked child un-shares most of the parent's Python
# heap (idle PSS measured: api 126, maintenance 70, rpc 59, in-thread workers 55 MiB,
# parent 53).
#
# Here, as Debian's neutron-server otherwise:
#  - no RPC worker: its consumers (q-plugin, q-reports-plugin, q-server-resource-versions)
#    serve Neutron's own agents (OVS, DHCP, L3), which an ML2/OVN cloud does not run; the
#    OVN metadata agent reports through the OVN southbound database, not RPC. It also held
#    a full copy of both OVN databases for nothing: it has no hash ring node, so it drops
#    every OVN event. It is kept when ML2 has a mechanism driver other than ovn.
#  - the in-thread workers run as green threads of the MaintenanceWorker's process (the
#    worker that owns ML2/OVN's periodic repairs) instead of a process of their own.
import sys

# Neutron names things after the program (iptables_manager's chain prefix, read from
# sys.argv[0] when it is imported): the packaged program's name, not "-c".
sys.argv[0] = "/usr/bin/neutron-server"

# Patches eventlet in first, as /usr/bin/neutron-server does.
from neutron.cmd.eventlet.server import main as server_main

from oslo_config import cfg
from oslo_log import log as logging
from oslo_service import service as oslo_service

from neutron.plugins.ml2.drivers.ovn.mech_driver.ovsdb import worker as ovn_worker
from neutron import service

LOG = logging.getLogger("neutron-server")


def ovn_only():
    return list(cfg.CONF.ml2.mechanism_drivers) == ["ovn"]


def in_thread_workers(workers):
    return [w for w in workers if w.worker_process_count < 1]


class MaintenanceWithThreadWorkers(object):
    """Starts the in-thread workers when the MaintenanceWorker starts, in its process.

    Only the class's methods are wrapped: ML2/OVN picks what to connect in a worker by
    the exact class of the bound start method that publishes the worker's start, so the
    worker must stay a MaintenanceWorker.
    """

    def __init__(self, threaded):
        self.threaded = threaded
        self.launcher = None

    def install(self):
        cls = ovn_worker.MaintenanceWorker
        start, stop, wait = cls.start, cls.stop, cls.wait
        outer = self

        def start_all(worker):
            start(worker)
            outer.launcher = oslo_service.Launcher(cfg.CONF, restart_method="mutate")
            for w in outer.threaded:
                # The process keeps the MaintenanceWorker's title (a worker names its
                # process on start when it runs in a child).
                w._set_proctitle = "off"
                outer.launcher.launch_service(w)
            LOG.info("in-thread workers %s in the MaintenanceWorker's process",
                     ", ".join(type(w).__name__ for w in outer.threaded))

        def stop_all(worker):
            if outer.launcher is not None:
                outer.launcher.stop()
            stop(worker)

        def wait_all(worker):
            if outer.launcher is not None:
                outer.launcher.wait()
            wait(worker)

        cls.start, cls.stop, cls.wait = start_all, stop_all, wait_all


def main():
    get_rpc_workers = service._get_rpc_workers
    get_plugins_workers = service._get_plugins_workers

    def rpc_workers(plugin=None):
        if ovn_only():
            return []
        return get_rpc_workers(plugin)

    def plugins_workers():
        workers = get_plugins_workers()
        if not ovn_only() or not any(isinstance(w, ovn_worker.MaintenanceWorker) for w in workers):
            return workers
        threaded = in_thread_workers(workers)
        MaintenanceWithThreadWorkers(threaded).install()
        return [w for w in workers if w not in threaded]

    service._get_rpc_workers = rpc_workers
    service._get_plugins_workers = plugins_workers
    server_main()


main()
