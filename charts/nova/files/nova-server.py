# nova-server: Nova's control-plane services in one Python process (the single-replica
# layout).
#
# Usage: python3 -c <this program> SERVICES --config-file /etc/nova/nova.conf
#   SERVICES  a comma-separated subset of api,conductor,scheduler,novncproxy
#
# Debian's nova-api forks a child per API under a parent that only waits, and
# nova-conductor and nova-scheduler are interpreters of their own: each has the whole of
# Nova imported (about 120-140 MiB idle). Here one interpreter runs them as services of
# one oslo.service ServiceLauncher (green threads of the same process), set up as each of
# those binaries sets up: the APIs of [DEFAULT] enabled_apis (osapi_compute on 8774,
# metadata on 8775) and the conductor and scheduler RPC services under their usual names.
#
# nova-novncproxy is a process of its own (websockify's server loop forks a child per
# console connection, which must not carry the RPC services' green threads and sockets),
# started when it is needed: this process listens on the proxy's port, and when a console
# connection waits on it, it starts the packaged proxy (a new interpreter running this
# program's "novncproxy-on-demand") with that listening socket, which accepts the waiting
# connection and serves until it has had no connection for NOVNC_IDLE_EXIT seconds, then
# exits (status 0) and this process waits again. A cloud whose consoles nobody opens holds
# no proxy (alone, or forked from here, it idles at 90-125 MiB of PSS); the first console
# after a quiet time waits for the proxy's start (a few seconds). The proxy dies with this
# process; this one exits when the proxy fails (any other status), and the kubelet
# restarts the pod.
import sys

# nova.cmd patches eventlet in first, as the packaged binaries do; nova.cmd.api registers
# the remote-debug options they share.
import nova.cmd.api  # noqa: F401

import ctypes
import logging as python_logging
import os
import signal

import eventlet
from eventlet.green import subprocess
from keystoneauth1 import exceptions as ks_exceptions
from openstack import exceptions as sdk_exceptions
from oslo_log import log as logging
from oslo_reports import guru_meditation_report as gmr
from oslo_reports import opts as gmr_opts
from oslo_service import service as oslo_service

from nova.conductor import rpcapi as conductor_rpcapi
import nova.conf
from nova import config
from nova import objects
from nova.scheduler import rpcapi as scheduler_rpcapi
from nova import service
from nova import version

KNOWN = ("api", "conductor", "scheduler", "novncproxy")
PR_SET_PDEATHSIG = 1
# The proxy started on demand: the command that runs it, the variables that hand it the
# listening socket and this process's pid, and how long it serves with no connection
# (seconds; NOVA_SERVER_NOVNC_IDLE_EXIT sets another, whole seconds above 0).
ON_DEMAND = "novncproxy-on-demand"
FD_ENV, PARENT_ENV = "NOVA_SERVER_NOVNC_FD", "NOVA_SERVER_PID"
IDLE_ENV = "NOVA_SERVER_NOVNC_IDLE_EXIT"
NOVNC_IDLE_EXIT = os.environ.get(IDLE_ENV, "600")
if not (NOVNC_IDLE_EXIT.isascii() and NOVNC_IDLE_EXIT.isdigit()) or int(NOVNC_IDLE_EXIT) == 0:
    sys.exit("nova-server: %s=%r is not whole seconds above 0" % (IDLE_ENV, NOVNC_IDLE_EXIT))
NOVNC_IDLE_EXIT = int(NOVNC_IDLE_EXIT)


def parse_services(arg):
    names = [s for s in arg.split(",") if s]
    unknown = [s for s in names if s not in KNOWN]
    if not names or unknown:
        sys.exit("nova-server: services %r: want a comma-separated subset of %s" % (arg, ",".join(KNOWN)))
    return names


def create_scheduler(log):
    """nova-scheduler's service, once Keystone and Placement answer.

    The scheduler's placement client looks Placement up in Keystone's catalog when it is
    made. Alone, nova-scheduler exits when that fails (and the kubelet restarts it);
    here that would take the APIs and the conductor down with it, so it waits in its own
    green thread, with the others serving, and says why in the log.
    """
    delay = 1
    while True:
        try:
            return service.Service.create(binary="nova-scheduler", topic=scheduler_rpcapi.RPC_TOPIC)
        except (ks_exceptions.ClientException, sdk_exceptions.SDKException) as e:
            log.warning("nova-scheduler cannot start yet (Keystone or Placement: %s); retrying in %d s", e, delay)
            eventlet.sleep(delay)
            delay = min(delay * 2, 30)


def start_scheduler(launcher, log):
    """Makes and launches the scheduler, or ends the process.

    Any failure but the awaited Keystone or Placement one would otherwise end only this
    green thread: the APIs and the conductor would serve on, with no scheduler (no server
    could be placed, no new compute host mapped) and nothing to restart it. Alone,
    nova-scheduler exits then and the kubelet restarts it; so does this process.
    """
    try:
        launcher.launch_service(create_scheduler(log))
    except BaseException:
        log.exception("nova-scheduler failed to start: nova-server exits")
        python_logging.shutdown()
        os._exit(1)


def novncproxy_socket(conf):
    """Binds and listens on the noVNC proxy's address, as websockify would.

    A socket of the unpatched socket module: the proxy inherits it as a blocking socket
    (a green one is non-blocking, and that flag is shared with the proxy's copy).
    """
    real = eventlet.patcher.original("socket")
    host, port = conf.vnc.novncproxy_host, conf.vnc.novncproxy_port
    family, kind, proto, _, addr = real.getaddrinfo(host, port, 0, real.SOCK_STREAM, 0, real.AI_PASSIVE)[0]
    sock = real.socket(family, kind, proto)
    sock.setsockopt(real.SOL_SOCKET, real.SO_REUSEADDR, 1)
    sock.bind(addr)
    sock.listen(100)
    return sock


def serve_novncproxy(sock, conf_args, log):
    """Starts nova-novncproxy when a connection waits on sock; again after it exits idle.

    Ends this process when the proxy fails to start or ends with any status but 0 (its
    idle exit), as the proxy's own Deployment would be restarted by the kubelet.
    """
    program = sys.orig_argv[sys.orig_argv.index("-c") + 1]
    env = dict(os.environ, **{FD_ENV: str(sock.fileno()), PARENT_ENV: str(os.getpid())})
    while True:
        eventlet.hubs.trampoline(sock.fileno(), read=True)
        try:
            proxy = subprocess.Popen([sys.executable, "-c", program, ON_DEMAND] + conf_args,
                                     pass_fds=[sock.fileno()], env=env)
        except OSError as e:
            log.error("nova-novncproxy could not start (%s): nova-server exits", e)
            python_logging.shutdown()
            os._exit(1)
        log.info("nova-novncproxy started (pid %d) for a console connection", proxy.pid)
        status = proxy.wait()
        if status != 0:
            log.error("nova-novncproxy (pid %d) ended with status %d: nova-server exits", proxy.pid, status)
            python_logging.shutdown()
            os._exit(1)
        log.info("nova-novncproxy (pid %d) had no connection for %d s and stopped; it starts "
                 "again at the next one", proxy.pid, NOVNC_IDLE_EXIT)


def run_novncproxy_on_demand():
    """nova-novncproxy (Debian's nova.cmd.novncproxy.main) on the listening socket it was given.

    Run by serve_novncproxy; exits 0 after NOVNC_IDLE_EXIT seconds with no connection.
    """
    try:
        fd, parent = int(os.environ.pop(FD_ENV)), int(os.environ.pop(PARENT_ENV))
    except (KeyError, ValueError):
        sys.exit("nova-server: %s is started by nova-server only" % ON_DEMAND)
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        sys.exit(1)
    import socket

    from nova.cmd import novncproxy
    from nova.console import websocketproxy

    # The class keeps its name (its __init__ calls super() by it): only __init__ changes.
    init = websocketproxy.NovaWebSocketProxy.__init__

    def on_demand_init(self, *args, **kwargs):
        kwargs.update(listen_fd=fd, idle_timeout=NOVNC_IDLE_EXIT)
        init(self, *args, **kwargs)

    websocketproxy.NovaWebSocketProxy.__init__ = on_demand_init
    # websockify takes a listen_fd as IPv4; the socket itself knows its family.
    socket.fromfd = lambda f, *_: socket.socket(fileno=os.dup(f))
    sys.argv[0] = "/usr/bin/nova-novncproxy"
    novncproxy.main()


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: nova-server SERVICES --config-file FILE")
    if sys.argv[1] == ON_DEMAND:
        del sys.argv[1]
        run_novncproxy_on_demand()
        return
    names = parse_services(sys.argv.pop(1))
    conf_args = sys.argv[1:]
    sys.argv[0] = "/usr/bin/nova-server"
    CONF = nova.conf.CONF

    config.parse_args(sys.argv)
    logging.setup(CONF, "nova")
    objects.register_all()
    gmr_opts.set_defaults(CONF)
    objects.Service.enable_min_version_cache()
    gmr.TextGuruMeditation.setup_autorun(version, conf=CONF)
    log = logging.getLogger("nova-server")

    if "novncproxy" in names:
        eventlet.spawn_n(serve_novncproxy, novncproxy_socket(CONF), conf_args, log)
    launcher = oslo_service.ServiceLauncher(CONF, restart_method="mutate")
    if "api" in names:
        if not CONF.enabled_apis:
            sys.exit("nova-server: the api service needs [DEFAULT] enabled_apis")
        for api in CONF.enabled_apis:
            launcher.launch_service(service.WSGIService(api, use_ssl=api in CONF.enabled_ssl_apis))
    if "conductor" in names:
        launcher.launch_service(service.Service.create(binary="nova-conductor", topic=conductor_rpcapi.RPC_TOPIC))
    if "scheduler" in names:
        eventlet.spawn_n(start_scheduler, launcher, log)
    log.info("nova-server running %s in one process", ", ".join(names))
    launcher.wait()


main()
