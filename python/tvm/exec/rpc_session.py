"""The session zygote of an RPC server (started by the server; internal): a process that runs
the server's set-up once, then serves each authenticated connection the server hands it over
the channel in a child process of its own (see :mod:`tvm.rpc._zygote`).

Usage: ``python -m tvm.exec.rpc_session CHANNEL_FD``, with CHANNEL_FD the inherited end of the
server's ``AF_UNIX`` ``SOCK_SEQPACKET`` socket pair.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    """Runs the zygote on the channel descriptor ``argv[0]`` until the server closes it."""
    from ..rpc._zygote_process import zygote_main

    if len(argv) != 1 or not argv[0].isdigit():
        print("usage: python -m tvm.exec.rpc_session CHANNEL_FD", file=sys.stderr)
        return 2
    return zygote_main(int(argv[0]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
