# neutron-server with ML2/OVN in two processes instead of five.
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
#  - the API in the parent's process (api_workers 0), started after the MaintenanceWorker
#    is forked: Neutron with api_workers 0 starts the API first, and ML2/OVN then never
#    connects it to the OVN databases (it does that on the AFTER_INIT event, which
#    Neutron's workers send only in a forked child), so every write that reached OVN hung
#    ("HashRing is empty"). Here the API sends that event itself, after the fork, so the
#    MaintenanceWorker is not forked from a process holding OVN connections and their
#    threads. A MaintenanceWorker that ends is not forked again from this process (it
#    would be, from one holding those connections): the server ends and the kubelet
#    restarts it.
#  - no RPC worker: its consumers (q-plugin, q-reports-plugin, q-server-resource-versions)
#    serve Neutron's own agents (OVS, DHCP, L3), which an ML2/OVN cloud does not run; the
#    OVN metadata agent reports through the OVN southbound database, not RPC. It also held
#    a full copy of both OVN databases for nothing: it has no hash ring node, so it drops
#    every OVN event. It is kept when ML2 has a mechanism driver other than ovn.
#  - the in-thread workers run as green threads of the MaintenanceWorker's process (the
#    worker that owns ML2/OVN's periodic repairs) instead of a process of their own.
#
# One change to ML2/OVN's port bindings: a port bound as an OVS VIF carries the datapath
# type of its host's chassis (bind_ports_with_datapath_type).
import logging as python_logging
import os
import sys

# Neutron names things after the program (iptables_manager's chain prefix, read from
# sys.argv[0] when it is imported): the packaged program's name, not "-c".
sys.argv[0] = "/usr/bin/neutron-server"

# Patches eventlet in first, as /usr/bin/neutron-server does.
from neutron.cmd.eventlet.server import main as server_main

from oslo_config import cfg
from oslo_log import log as logging
from oslo_service import service as oslo_service

from neutron_lib.api.definitions import portbindings
from neutron_lib.callbacks import events
from neutron_lib.callbacks import registry
from neutron_lib.callbacks import resources

from neutron.common.ovn import constants as ovn_const
from neutron.plugins.ml2.drivers.ovn.agent import neutron_agent as n_agent
from neutron.plugins.ml2.drivers.ovn.mech_driver import mech_driver
from neutron.plugins.ml2.drivers.ovn.mech_driver.ovsdb import worker as ovn_worker
from neutron import service
try:
    from neutron.api import wsgi  # 2024.2 on (neutron.wsgi is the uWSGI entry point)
except ImportError as older:  # noqa: F841 (the module of the older release below)
    from neutron import wsgi  # Zed

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


def api_after_the_fork():
    """Starts an in-process API (api_workers 0) once the plugins' workers are forked.

    Neutron starts the API in wsgi.Server._launch when its NeutronApiService starts, before
    start_all_workers forks the workers; here _launch is put off until start_all_workers has
    forked them, then the API sends the AFTER_INIT event that Neutron sends only in a
    forked worker (ML2/OVN connects that worker to the OVN databases and adds it to its hash
    ring then), before it serves, as a forked API worker does.
    """
    launch = wsgi.Server._launch
    start_all_workers = service.start_all_workers
    waiting = []

    def launch_later(server, application, workers=0, desc=None):
        if workers >= 1:
            return launch(server, application, workers, desc)
        waiting.append((server, application, desc))

    worker_start = wsgi.WorkerService.start

    def start_in_process(worker, desc=None):
        if worker.worker_process_count < 1:
            registry.publish(resources.PROCESS, events.AFTER_INIT, worker.start)
        worker_start(worker, desc)

    def no_second_fork(launcher):
        def start_child(wrap):
            LOG.error("a forked worker (%s) ended; neutron-server ends with it (it is "
                      "not forked again from a process connected to OVN)",
                      type(wrap.service).__name__)
            python_logging.shutdown()
            os._exit(1)
        launcher._start_child = start_child

    def start_all_then_api(neutron_api=None):
        launcher = start_all_workers(neutron_api)
        if waiting and isinstance(launcher, oslo_service.ProcessLauncher):
            no_second_fork(launcher)
        while waiting:
            server, application, desc = waiting.pop(0)
            launch(server, application, 0, desc)
        return launcher

    wsgi.Server._launch = launch_later
    wsgi.WorkerService.start = start_in_process
    service.start_all_workers = start_all_then_api


def chassis_datapath_type(driver, context):
    """The datapath type ovn-controller publishes for the chassis of the port's host
    ("netdev", "system"), "" when unknown."""
    try:
        host = driver._ovn_client.determine_bind_host(context.current, port_context=context)
    except Exception as e:
        LOG.debug("no bind host for port %s: %s", context.current.get("id"), e)
        return ""
    for agent in n_agent.AgentCache().get_agents({"host": host, "agent_type": ovn_const.OVN_CONTROLLER_TYPES}):
        chassis = agent.chassis
        other = getattr(chassis, "other_config", None) or {}
        return other.get("datapath-type") or chassis.external_ids.get("datapath-type", "")
    return ""


def bind_ports_with_datapath_type():
    """Binds OVS VIFs with their chassis's datapath type in the VIF details.

    ML2/OVN binds a port as an OVS VIF with no datapath_type in its VIF details (ML2/OVS
    puts its agent's there). Nova then plugs it through os-vif with the kernel datapath
    ("system"), and os-vif sets that on br-int: on a chassis whose br-int runs on the
    userspace datapath (netdev), ovs-vswitchd deletes br-int and makes it again, every
    flow and OpenFlow connection of the node dropped and its tunnel ports re-added, each
    time a server's port is plugged, until ovn-controller sets netdev back. With the
    chassis's own datapath type in the details, os-vif leaves br-int as it is.
    """
    bind_port = mech_driver.OVNMechanismDriver.bind_port

    def bind_port_with_datapath_type(driver, context):
        set_binding = context.set_binding

        def set_binding_with_datapath_type(segment_id, vif_type, vif_details, *args, **kwargs):
            if vif_type == portbindings.VIF_TYPE_OVS and portbindings.OVS_DATAPATH_TYPE not in vif_details:
                datapath_type = chassis_datapath_type(driver, context)
                if datapath_type:
                    vif_details = dict(vif_details, **{portbindings.OVS_DATAPATH_TYPE: datapath_type})
            return set_binding(segment_id, vif_type, vif_details, *args, **kwargs)

        context.set_binding = set_binding_with_datapath_type
        try:
            return bind_port(driver, context)
        finally:
            del context.set_binding

    mech_driver.OVNMechanismDriver.bind_port = bind_port_with_datapath_type


def main():
    bind_ports_with_datapath_type()
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
    api_after_the_fork()  # only for api_workers 0: the configuration is not read yet
    server_main()


main()
