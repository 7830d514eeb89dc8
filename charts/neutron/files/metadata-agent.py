# neutron-ovn-metadata-agent with its metadata proxy in the agent's process.
#
# Usage: python3 -c <this program> --config-file /etc/neutron/neutron.conf --config-file ...
#
# Debian's agent forks [DEFAULT] metadata_workers proxy workers, each un-sharing part of the
# agent's Python heap (~24 MiB private each, idle). With metadata_workers 0 the proxy serves
# in the agent's process; its handler opens its connection to the OVN southbound database
# when a worker process announces its start (AFTER_INIT), which an in-process server never
# does: it is announced here once the server runs, or every metadata request would wait
# for ever.
#
# The privsep daemons stay helpers started through sudo (oslo.privsep's fork method was
# tried: the forked daemon runs the agent's green threads too, among them the OVSDB
# connections, and broke the agent's southbound connection).
import sys

# Neutron names things after the program (iptables_manager's chain prefix, read from
# sys.argv[0] when it is imported): the packaged program's name, not "-c".
sys.argv[0] = "/usr/bin/neutron-ovn-metadata-agent"

try:
    # 2024.2 on: the agent without eventlet.
    from neutron.cmd.agents import ovn_metadata
except ImportError as older:  # noqa: F841 (the module of the older release below)
    # Zed: patches eventlet in first, as /usr/bin/neutron-ovn-metadata-agent does.
    from neutron.cmd.eventlet.agents import ovn_metadata

from neutron_lib.callbacks import events, registry, resources

from neutron.agent.ovn.metadata import server


def announce_in_process_proxy():
    run = server.UnixDomainMetadataProxy.run

    def run_then_announce(self):
        run(self)
        if self.conf.metadata_workers == 0:
            registry.publish(resources.PROCESS, events.AFTER_INIT, self.run)

    server.UnixDomainMetadataProxy.run = run_then_announce


announce_in_process_proxy()
ovn_metadata.main()
