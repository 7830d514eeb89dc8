# nova-compute: Debian's /usr/bin/nova-compute (nova.cmd.compute's main), with one change.
#
# Usage: python3 -c <this program> --config-file /etc/nova/nova.conf
#
# oslo.concurrency runs a command that has resource limits (processutils.execute(...,
# prlimit=...): Nova's qemu-img calls) under a new Python interpreter,
# `python3 -m oslo_concurrency.prlimit --as=N --cpu=N -- COMMAND`, which sets the limits
# and execs the command. Nova makes six such calls to build a server (qemu-img info of its
# kernel, ramdisk, base image and disk) and two per server every minute (the resource
# audit's disk sizes): each one an interpreter start (0.1 s on an idle host, 0.2-0.7 s
# while a server is being built on two cores). util-linux's prlimit (in every Debian
# system) takes the same options (--as, --cpu, ... each setting the soft and the hard
# limit, as oslo's does) and execs the command in about a millisecond. Calls as root (the
# root helper goes inside the limits), through a shell, or naming their own interpreter
# (python_exec) keep oslo's way.
import sys

# nova.cmd patches eventlet in first, as the packaged binary does; processutils imported
# after that uses eventlet's green subprocess.
from nova.cmd.compute import main

from oslo_concurrency import processutils

PRLIMIT = "/usr/bin/prlimit"


def _limits_by_prlimit(execute):
    def run(*cmd, **kwargs):
        limits = kwargs.get("prlimit")
        args = limits.prlimit_args() if limits else []
        if args and not (kwargs.get("run_as_root") or kwargs.get("shell") or kwargs.get("python_exec")):
            kwargs = dict(kwargs)
            del kwargs["prlimit"]
            cmd = (PRLIMIT, *args, "--", *cmd)
        return execute(*cmd, **kwargs)

    run.__doc__ = execute.__doc__
    return run


processutils.execute = _limits_by_prlimit(processutils.execute)

sys.exit(main())  # end of the set-up (the charts' tests run what comes before)
