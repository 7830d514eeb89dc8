# heat-server: heat-api, heat-api-cfn and heat-engine in one Python process (the
# single-replica layout).
#
# Usage: python3 -c <this program> --config-file /etc/heat/heat.conf
#
# Each of Debian's heat-api, heat-api-cfn and heat-engine is an interpreter of its own with
# Heat imported (about 100-135 MiB each, idle). Heat's own heat-all (heat.cmd.all, not
# packaged as a command by Debian) starts the services of [heat_all] enabled_services
# (default: all three) as green threads of one process, each as its own binary sets it up;
# with [heat_api] and [heat_api_cfn] workers = 1 and num_engine_workers = 1 nothing forks.
# This runs it, and ends the process when the engine's oslo.service launcher returns (on
# SIGTERM, after the engine stopped): the APIs' in-process servers have no stop of their
# own, and heat-all would wait on them for ever.
import sys

# heat.cmd.all patches eventlet in first, as the packaged binaries do.
import heat.cmd.all as heat_all

import logging as python_logging
import os

from oslo_config import cfg
from oslo_log import log as logging
from oslo_service import systemd


def main():
    sys.argv[0] = "/usr/bin/heat-server"
    threads = heat_all.launch_all()
    services = [t.wait() for t in threads]
    systemd.notify_once()
    log = logging.getLogger("heat-server")
    log.info("heat-server running %s in one process", ", ".join(sorted(cfg.CONF.heat_all.enabled_services)))
    launchers = [s for s in services if hasattr(s, "launch_service")]
    if not launchers:
        for s in services:
            s.wait()
        return
    for launcher in launchers:
        launcher.wait()
    python_logging.shutdown()
    os._exit(0)


main()
