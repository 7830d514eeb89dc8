# nova-db-setup: the nova-init Job's database setup in one Python process, as these
# nova-manage commands in turn:
#   api_db sync; cell_v2 map_cell0; cell_v2 create_cell --name cell1 (unless a cell named
#   cell1 exists, else cell_v2 update_cell of its transport_url when the config's differs);
#   db sync (cell0 and cell1)
# Each nova-manage process imports the whole of Nova first (3-10 s of CPU on a 2-core host,
# most of each command's time), and these steps are on osd init's critical path: Nova's
# control plane waits for them (wait-db). Idempotent as the commands are: a re-run migrates
# nothing, says cell0 is set up and keeps the one cell1.
#
# Usage: python3 -c <this program> --config-file /etc/nova/nova.conf
import sys
import time

sys.argv[0] = "nova-db-setup"  # python3 -c leaves "-c", which names log lines and programs

# nova-manage's own module: its command classes, and nova.cmd's eventlet patching first.
from nova.cmd import manage

from oslo_log import log as logging

import nova.conf
from nova import config
from nova import context
from nova import objects
from nova import rpc

CONF = nova.conf.CONF


def run(what, fn, **kwargs):
    began = time.monotonic()
    ret = fn(**kwargs)
    if ret not in (None, 0):
        sys.exit("nova-manage %s failed (%s)" % (what, ret))
    print("%s: done in %.1f s" % (what, time.monotonic() - began), flush=True)


def main():
    # As nova-manage's main() sets itself up, parsing once for every command.
    config.parse_args(["nova-db-setup"] + sys.argv[1:])
    logging.set_defaults(default_log_levels=logging.get_default_log_levels() + manage._EXTRA_DEFAULT_LOG_LEVELS)
    logging.setup(CONF, "nova")
    objects.register_all()

    run("api_db sync", manage.ApiDbCommands().sync)
    cells = manage.CellV2Commands()
    run("cell_v2 map_cell0", cells.map_cell0)
    cell1 = [c for c in objects.CellMappingList.get_all(context.get_admin_context()) if c.name == "cell1"]
    if cell1:
        print("cell_v2 create_cell: cell1 exists", flush=True)
        # The API and conductor reach cell1's computes through the mapping's transport_url
        # (create_cell stored the config's): a cloud made with the RabbitMQ user all
        # services shared gets nova's own user, as `cell_v2 update_cell` would set it.
        if cell1[0].transport_url != CONF.transport_url:
            cell1[0].transport_url = CONF.transport_url
            cell1[0].save()
            print("cell_v2 update_cell: cell1's transport_url set to this config's", flush=True)
    else:
        run("cell_v2 create_cell --name cell1", cells.create_cell, name="cell1")
    run("db sync", manage.DbCommands().sync)
    rpc.cleanup()


if __name__ == "__main__":
    main()
