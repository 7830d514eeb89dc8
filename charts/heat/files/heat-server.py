# heat-server: heat-api, heat-api-cfn and heat-engine in one Python process (the
# single-replica layout).
#
# Usage: python3 -c <this program> [--on-demand | --check] --config-file /etc/heat/heat.conf
#
# Each of Debian's heat-api, heat-api-cfn and heat-engine is an interpreter of its own with
# Heat imported (about 100-135 MiB each, idle). Heat's own heat-all (heat.cmd.all, not
# packaged as a command by Debian) starts the services of [heat_all] enabled_services
# (default: all three) as green threads of one process, each as its own binary sets it up;
# with [heat_api] and [heat_api_cfn] workers = 1 and num_engine_workers = 1 nothing forks.
# This runs it, and ends the process when the engine's oslo.service launcher returns (on
# SIGTERM, after the engine stopped): the APIs' in-process servers have no stop of their
# own, and heat-all would wait on them for ever.
#
# With --on-demand as its first argument (the chart's onDemand, the default) the process
# first holds only the APIs' listening sockets, with nothing of Heat imported (a few MiB
# instead of about 140): an idle cloud whose users never call Heat does not pay for it.
# Probes get an answer from this gate (kube-probe's and osd's, by their User-Agent, and
# connections that close without a request); the first other request starts Heat in this
# process on the same sockets, and that request, held meanwhile, is passed on to Heat's
# API once it serves (Heat's start takes seconds). From then on Heat runs as without the
# flag, until the pod ends. With --check it loads the configuration and builds both APIs'
# applications, then exits (the pod's heat-check init container, so that a configuration
# Heat cannot load fails the pod at its start, not at the first request).
import sys


def on_demand_gate(argv):
    """Holds the APIs' sockets until a request that is not a probe; returns the gate.

    Runs before eventlet is imported: it keeps the real socket, select and thread
    functions, so that its thread and the connections it passes on to Heat are untouched
    by eventlet's patching later.
    """
    import configparser
    import os
    import select
    import socket
    import time
    import _thread

    real_socket, real_select, start_thread, now = socket.socket, select.select, _thread.start_new_thread, time.monotonic
    probe_agents = (b"kube-probe/", b"osd-probe")
    answer = b"heat-server: Heat starts at the first API request\n"
    probe_reply = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                   b"Connection: close\r\n\r\n%s" % (len(answer), answer))

    def say(msg):
        sys.stderr.write("heat-server: %s\n" % msg)
        sys.stderr.flush()

    # The APIs' addresses from the configuration files, as Heat reads them (later files
    # win): [heat_api] and [heat_api_cfn] bind_host and bind_port, for the services
    # [heat_all] enabled_services runs.
    files = []
    for i, a in enumerate(argv):
        if a == "--config-file" and i + 1 < len(argv):
            files.append(argv[i + 1])
        elif a.startswith("--config-file="):
            files.append(a.split("=", 1)[1])
    conf = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        read = conf.read(files)
    except configparser.Error as e:
        sys.exit("heat-server: --on-demand: reading %s: %s" % (", ".join(files), e))
    if not files or len(read) != len(files):
        sys.exit("heat-server: --on-demand: cannot read the configuration file(s) %s" % (", ".join(sorted(set(files) - set(read))) or "(none given)"))
    enabled = [s.strip() for s in conf.get("heat_all", "enabled_services", fallback="engine,api,api_cfn").split(",")]
    listeners = {}  # port -> listening socket
    for service, section, default in (("api", "heat_api", 8004), ("api_cfn", "heat_api_cfn", 8000)):
        if service not in enabled and "all" not in enabled:
            continue
        host = conf.get(section, "bind_host", fallback="0.0.0.0").strip() or "0.0.0.0"
        try:
            port = conf.getint(section, "bind_port", fallback=default)
        except ValueError as e:
            sys.exit("heat-server: --on-demand: [%s] bind_port: %s" % (section, e))
        s = real_socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, port))
        s.listen(conf.getint("DEFAULT", "backlog", fallback=4096))
        s.setblocking(False)
        listeners[port] = s
    if not listeners:
        return None

    class Gate(object):
        wanted = _thread.allocate_lock()  # released at the first request for Heat
        stopped = False

        def listener(self, port):
            return listeners.get(port)

        def stop(self):
            """Heat serves on the sockets now: the gate accepts no more."""
            self.stopped = True

    gate = Gate()
    gate.wanted.acquire()
    pending = {}  # connection -> [bytes read, deadline, listening port]
    max_pending = 256  # connections without a whole request head yet (each gets 10 s)
    held = []  # (connection, bytes read, listening port) of requests for Heat

    def pump(src, dst):
        try:
            while True:
                b = src.recv(65536)
                if not b:
                    break
                dst.sendall(b)
        except OSError as _e:
            pass
        for s, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            try:
                s.shutdown(how)
            except OSError as _e:
                pass

    def pass_on(conn, head, port):
        # To Heat's own server, through the listening socket it now accepts on.
        host = listeners[port].getsockname()[0]
        host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
        try:
            conn.setblocking(True)
            up = real_socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
            up.connect((host, port))
            up.sendall(head)
        except OSError as e:
            say("passing a held request on to Heat on port %d: %s" % (port, e))
            conn.close()
            return
        start_thread(pump, (conn, up))
        start_thread(pump, (up, conn))

    def classify(state):
        head = state[0]
        if b"\r\n\r\n" not in head and len(head) < 16384:
            return None
        lines = head.split(b"\r\n\r\n", 1)[0].split(b"\r\n")
        agent = b""
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"user-agent":
                agent = value.strip()
        if agent.startswith(probe_agents):
            return "probe"
        return lines[0]

    def run():
        try:
            serve()
        except BaseException as e:  # no gate, no probes: let the kubelet start the pod again
            say("the gate failed: %r" % (e,))
            os._exit(1)

    def serve():
        while listeners and (not gate.stopped or pending or held):
            if gate.stopped:
                while held:
                    pass_on(*held.pop(0))
                if not pending:
                    break
            watch = list(pending) + ([] if gate.stopped else list(listeners.values()))
            try:
                ready = real_select(watch, [], [], 0.2)[0]
            except (OSError, ValueError):
                ready = []
            t = now()
            for s in ready:
                if s in pending:
                    state = pending[s]
                    try:
                        b = s.recv(16384)
                    except BlockingIOError as _e:
                        continue
                    except OSError as _e:
                        b = b""
                    if not b:  # closed without a request: a TCP probe
                        del pending[s]
                        s.close()
                        continue
                    state[0] += b
                    what = classify(state)
                    if what is None:
                        continue
                    del pending[s]
                    if what == "probe":
                        try:
                            s.setblocking(True)
                            s.settimeout(5)
                            s.sendall(probe_reply)
                        except OSError as _e:
                            pass
                        s.close()
                        continue
                    held.append((s, state[0], state[2]))
                    if gate.wanted.locked():
                        say("starting Heat for a request on port %d (%s)" % (state[2], what.split(b" ")[0].decode("ascii", "replace")))
                        gate.wanted.release()
                    continue
                port = s.getsockname()[1]
                try:
                    conn, _ = s.accept()
                except (BlockingIOError, InterruptedError):
                    continue  # Heat took it
                except OSError as e:
                    say("accept on port %d: %s" % (port, e))
                    continue
                if len(pending) >= max_pending:  # many idle connections: refuse more
                    conn.close()
                    continue
                conn.setblocking(False)
                pending[conn] = [b"", t + 10, port]
            for s, state in list(pending.items()):
                if state[1] < t:  # no whole request head in 10 s
                    del pending[s]
                    s.close()

    start_thread(run, ())
    say("holding %s; Heat starts at the first request that is not a probe" % ", ".join(
        "%s:%d" % (s.getsockname()[0], p) for p, s in sorted(listeners.items())))
    return gate


gate = None
checking = sys.argv[1:2] == ["--check"]
if checking:
    del sys.argv[1]
elif sys.argv[1:2] == ["--on-demand"]:
    del sys.argv[1]
    gate = on_demand_gate(sys.argv[1:])
    if gate is not None:
        gate.wanted.acquire()

# heat.cmd.all patches eventlet in first, as the packaged binaries do.
import heat.cmd.all as heat_all

import logging as python_logging
import os

from oslo_config import cfg
from oslo_log import log as logging
from oslo_service import systemd


def serve_on_the_gates_sockets():
    """Heat's API servers take the sockets the gate holds instead of binding their own."""
    import eventlet.greenio
    from heat.common import wsgi

    def get_socket(conf, default_port):
        port = conf.bind_port or default_port
        s = gate.listener(port)
        if s is None:
            raise RuntimeError("heat-server: no socket held for port %d" % port)
        return eventlet.greenio.GreenSocket(s.dup())

    wsgi.get_socket = get_socket


def check():
    """--check: what Heat's APIs read at their start, without serving anything.

    The on-demand pod runs this once before its gate (an init container): a
    configuration Heat cannot load, or an API whose application does not build, fails
    the pod at its start instead of at a user's first request.
    """
    from heat.common import config
    from heat.common import messaging
    from heat import version

    logging.register_options(cfg.CONF)
    for prog in ("heat-api", "heat-api-cfn"):
        cfg.CONF(project="heat", prog=prog, version=version.version_info.version_string())
        config.set_config_defaults()
        messaging.setup()  # the transport the APIs' RPC clients take (it connects at first use)
        config.load_paste_app()
    print("heat-check: the configuration loads and both APIs' applications build", flush=True)


def main():
    sys.argv[0] = "/usr/bin/heat-server"
    if checking:
        check()
        return
    if gate is not None:
        serve_on_the_gates_sockets()
    threads = heat_all.launch_all()
    services = [t.wait() for t in threads]
    if gate is not None:
        gate.stop()
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
