# cinder-server: Cinder's services in one Python process (the single-replica layout).
#
# Usage: python3 -c <this program> SERVICES --config-file /etc/cinder/cinder.conf
#   SERVICES  a comma-separated subset of api,scheduler,volume,backup
#
# Each of Debian's cinder-api, cinder-scheduler, cinder-volume and cinder-backup is its own
# interpreter with the whole of Cinder imported (about 120-140 MiB each, idle). Here one
# interpreter runs them as services of one oslo.service ServiceLauncher (green threads of
# the same process), set up as /usr/bin/cinder-volume sets up (which also covers what the
# others set up), with the same service names and hosts as the separate binaries: the API
# on osapi_volume_listen:osapi_volume_listen_port (the paste app cinder-wsgi serves), the
# scheduler as cinder-scheduler, every enabled backend as cinder-volume on host@backend,
# the backup service as cinder-backup.
import sys

# cinder.cmd.volume patches eventlet in first, as the packaged binaries do, and registers
# the per-backend options; cinder.cmd.backup registers backup_max_operations.
import cinder.cmd.volume as volume
import cinder.cmd.backup  # noqa: F401

import logging as python_logging
import os
import shlex
import types

import os_brick
from eventlet import tpool
from oslo_config import cfg
from oslo_log import log as logging
from oslo_privsep import priv_context
from oslo_reports import guru_meditation_report as gmr
from oslo_reports import opts as gmr_opts
from oslo_service import service as oslo_service

from cinder.common import config
from cinder import coordination
from cinder import objects
from cinder import rpc
from cinder import service
from cinder import utils
from cinder import version

KNOWN = ("api", "scheduler", "volume", "backup")


def parse_services(arg):
    names = [s for s in arg.split(",") if s]
    unknown = [s for s in names if s not in KNOWN]
    if not names or unknown:
        sys.exit("cinder-server: services %r: want a comma-separated subset of %s" % (arg, ",".join(KNOWN)))
    return names


def connect_off_the_hub():
    """Runs the RBD driver's connections to Ceph in a native thread.

    The driver calls librados' connect from the service's green thread, which holds every
    green thread of the process until the monitors answer (up to librados' 300 s when
    they are not up yet, as after a power cut): alone in cinder-volume that stalls only
    the volume service; here it would stall the API and the others too, and SIGTERM.
    The backup driver already connects through eventlet's thread pool; this does the
    same for the volume driver, with everything else of librados unchanged.
    """
    from cinder.volume.drivers import rbd as rbd_driver

    real = rbd_driver.rados
    if real is None:
        return

    class Rados(real.Rados):
        def connect(self, *args, **kwargs):
            return tpool.execute(real.Rados.connect, self, *args, **kwargs)

    shim = types.ModuleType(real.__name__)
    shim.__dict__.update(real.__dict__)
    shim.Rados = Rados
    rbd_driver.rados = shim


def one_row_per_service(volume_services):
    """Gives each service of the process its own heartbeat.

    cinder.service.Service keeps the id of its row in the services table in a class
    attribute, Service.service_id: one per process, as Cinder runs one service per
    process. Its heartbeat (report_state) updates the row that attribute names, so with
    several services in one process every heartbeat would go to the row of whichever was
    made last, and the others would look down to the scheduler ("volume service is
    down"). Here each heartbeat updates the service's own row (origin_service_id, which
    each Service also keeps), as report_state does otherwise; and the class attribute,
    which Cinder also reads to record which service works on a volume or snapshot (for
    the cleanup after a crash), names the volume service, the one doing that work.
    """
    from oslo_db import exception as db_exc

    from cinder import context
    from cinder import exception

    Service = service.Service
    log = logging.getLogger("cinder-server")

    def point_at_volume():
        if volume_services:
            Service.service_id = volume_services[0].origin_service_id

    def report_state(self):
        if not self.manager.is_working():
            log.error('Manager for service %(binary)s %(host)s is reporting problems, not '
                      'sending heartbeat. Service will appear "down".',
                      {"binary": self.binary, "host": self.host})
            return
        ctxt = context.get_admin_context()
        try:
            try:
                ref = objects.Service.get_by_id(ctxt, self.origin_service_id)
            except exception.NotFound:
                log.debug("The service database object disappeared, recreating it.")
                self._create_service_ref(ctxt)
                point_at_volume()
                ref = objects.Service.get_by_id(ctxt, self.origin_service_id)
            ref.report_count += 1
            if self.availability_zone != ref.availability_zone:
                ref.availability_zone = self.availability_zone
            ref.save()
            if getattr(self, "model_disconnected", False):
                self.model_disconnected = False
                log.error("Recovered model server connection!")
        except Exception as e:
            # The database gone, other database errors (as in HA) or any: the timer lives on.
            if isinstance(e, db_exc.DBConnectionError):
                if not getattr(self, "model_disconnected", False):
                    self.model_disconnected = True
                    log.exception("model server went away")
                return
            if not getattr(self, "model_disconnected", False):
                self.model_disconnected = True
                log.exception("%s encountered: ", "DBError" if isinstance(e, db_exc.DBError) else "Exception")

    start = Service.start

    def start_then_point_at_volume(self):
        # start sets the class attribute to this service's row for its own init_host.
        start(self)
        point_at_volume()

    Service.report_state = report_state
    Service.start = start_then_point_at_volume
    return point_at_volume


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: cinder-server SERVICES --config-file FILE")
    names = parse_services(sys.argv.pop(1))
    sys.argv[0] = "/usr/bin/cinder-server"
    CONF = cfg.CONF

    objects.register_all()
    gmr_opts.set_defaults(CONF)
    CONF(sys.argv[1:], project="cinder", version=version.version_string())
    config.set_middleware_defaults()
    logging.setup(CONF, "cinder")
    python_logging.captureWarnings(True)
    priv_context.init(root_helper=shlex.split(utils.get_root_helper()))
    utils.monkey_patch()
    gmr.TextGuruMeditation.setup_autorun(version, conf=CONF)
    os_brick.setup(CONF)
    log = logging.getLogger("cinder-server")
    volume.LOG = log

    # As cinder-api sets up before loading its app (whose controllers make RPC clients);
    # the other services do the same on creation.
    coordination.COORDINATOR.start()
    rpc.init(CONF)

    # Before any service is made: each service object is made here, then started by the
    # launcher in a green thread, which may run while the next one is being made.
    volume_services = []
    point_at_volume = one_row_per_service(volume_services)

    launcher = oslo_service.ServiceLauncher(CONF, restart_method="mutate")
    if "api" in names:
        launcher.launch_service(service.WSGIService("osapi_volume"))
    if "scheduler" in names:
        launcher.launch_service(service.Service.create(binary="cinder-scheduler"))

    class Recorder(object):
        def launch_service(self, server, workers=1):
            volume_services.append(server)
            launcher.launch_service(server, workers=workers)

    if "volume" in names:
        connect_off_the_hub()
        if not CONF.enabled_backends:
            sys.exit("cinder-server: the volume service needs [DEFAULT] enabled_backends")
        for backend in filter(None, CONF.enabled_backends):
            volume._launch_service(Recorder(), backend)
        volume._ensure_service_started()
    if "backup" in names:
        semaphore = utils.semaphore_factory(CONF.backup_max_operations, 1)
        launcher.launch_service(service.Service.create(
            binary="cinder-backup", coordination=True, service_name="backup",
            process_number=1, semaphore=semaphore))
    point_at_volume()
    log.info("cinder-server running %s in one process", ", ".join(names))
    try:
        launcher.wait()
    except KeyboardInterrupt:
        launcher.stop()
    rpc.cleanup()
    # Every service has stopped. Leave without eventlet's exit handler, which joins its
    # thread pool and so would wait for a connection to Ceph still pending there.
    python_logging.shutdown()
    os._exit(0)


main()
