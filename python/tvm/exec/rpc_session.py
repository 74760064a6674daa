"""Serves one accepted RPC connection (started by the server for each client; internal).

Usage: ``python -m tvm.exec.rpc_session FD KEY [LIBRARIES]``, with the socket inherited as FD.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> int:
    """Serves the connection on FD, then closes it."""
    from ..rpc.server import serve_session_process

    fd, key = int(argv[0]), argv[1]
    try:
        libraries = argv[2] if len(argv) > 2 else ""
        return serve_session_process("rpc.ServeSocket", fd, key, libraries=libraries)
    finally:
        os.close(fd)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
