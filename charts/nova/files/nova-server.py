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
# console connection, which must not carry the RPC services' green threads and sockets):
# forked from this one before anything connects or starts, with Nova imported already,
# so that the two share those pages instead of each holding its own copy (alone it idles
# at ~125 MiB of PSS). The proxy dies with this process; this one exits when the proxy
# does, and the kubelet restarts the pod.
import sys

# nova.cmd patches eventlet in first, as the packaged binaries do; nova.cmd.api registers
# the remote-debug options they share.
import nova.cmd.api  # noqa: F401

import ctypes
import gc
import logging as python_logging
import os
import signal

import eventlet
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


def fork_novncproxy():
    """Forks nova-novncproxy (Debian's nova.cmd.novncproxy.main) and returns its pid.

    Called before the configuration is parsed: nothing is connected and no green thread
    runs yet, so the child starts as the packaged program would, with the same argv.
    """
    from nova.cmd import novncproxy

    gc.collect()
    # The modules' objects stay out of both processes' collections: a collection touches
    # every object it tracks, which would copy the shared pages.
    gc.freeze()
    parent = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(1)
        sys.argv[0] = "/usr/bin/nova-novncproxy"
        novncproxy.main()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        import traceback
        traceback.print_exc()
    finally:
        os._exit(code)


def watch_novncproxy(pid, log):
    """Ends this process when the forked nova-novncproxy has ended."""
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError as reaped:  # by someone else: gone all the same
            done, status = pid, reaped.errno
        if done:
            log.error("nova-novncproxy (pid %d) ended (wait status %d): nova-server exits", pid, status)
            python_logging.shutdown()
            os._exit(1)
        eventlet.sleep(1)


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: nova-server SERVICES --config-file FILE")
    names = parse_services(sys.argv.pop(1))
    sys.argv[0] = "/usr/bin/nova-server"
    CONF = nova.conf.CONF
    proxy = fork_novncproxy() if "novncproxy" in names else None

    config.parse_args(sys.argv)
    logging.setup(CONF, "nova")
    objects.register_all()
    gmr_opts.set_defaults(CONF)
    objects.Service.enable_min_version_cache()
    gmr.TextGuruMeditation.setup_autorun(version, conf=CONF)
    log = logging.getLogger("nova-server")

    if proxy is not None:
        eventlet.spawn_n(watch_novncproxy, proxy, log)
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
