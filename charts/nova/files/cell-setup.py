# nova-cell-setup: maps the compute hosts of cell1 as `nova-manage cell_v2 discover_hosts`
# does, polling every 2 s in one Python process until a host is mapped to cell1, then lists
# the mapped hosts. A shell loop of nova-manage calls started two interpreters per try (each
# importing the whole of Nova, 3-10 s of CPU on a 2-core host) while nova-compute, on osd
# init's critical path, started beside it.
#
# Usage: python3 -c <this program> TIMEOUT_SECONDS --config-file /etc/nova/nova.conf
import sys
import time

sys.argv[0] = "nova-cell-setup"  # python3 -c leaves "-c", which names log lines and programs

# nova-manage's own module: its log levels, and nova.cmd's eventlet patching first.
from nova.cmd import manage

from oslo_log import log as logging

import nova.conf
from nova import config
from nova import context
from nova import exception
from nova import objects
from nova.objects import host_mapping

CONF = nova.conf.CONF


def main():
    timeout = int(sys.argv[1])
    config.parse_args(["nova-cell-setup"] + sys.argv[2:])
    logging.set_defaults(default_log_levels=logging.get_default_log_levels() + manage._EXTRA_DEFAULT_LOG_LEVELS)
    logging.setup(CONF, "nova")
    objects.register_all()
    ctxt = context.get_admin_context()

    began, next_note = time.monotonic(), 0
    while True:
        waited = time.monotonic() - began
        # What discover_hosts --verbose says, on the first try and every 30 s.
        verbose = waited >= next_note
        if verbose:
            next_note = waited + 30
        try:
            for m in host_mapping.discover_hosts(ctxt, status_fn=print if verbose else None):
                print("mapped compute host %s to cell %s" % (m.host, m.cell_mapping.name), flush=True)
        except exception.HostMappingExists as e:  # the scheduler's periodic discovery came first
            print("a host was mapped meanwhile (%s): looking again" % e, flush=True)
        hosts = sorted(m.host for m in objects.HostMappingList.get_all(ctxt) if m.cell_mapping.name == "cell1")
        if hosts:
            print("compute hosts in cell1: %s" % ", ".join(hosts), flush=True)
            return
        if waited > timeout:
            sys.exit("no nova-compute host registered in cell1 after %d s: is the nova-compute DaemonSet running "
                     "on a node labelled node-restriction.kubernetes.io/openstack-compute-node=enabled?" % waited)
        sys.stdout.flush()
        time.sleep(2)


if __name__ == "__main__":
    main()
