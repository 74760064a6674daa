"""Serves one authenticated RPC connection (started by the server for each client once its
handshake is complete; internal).

Usage: ``python -m tvm.exec.rpc_session FD CLIENT_KEY [LIBRARIES]``, with the socket inherited
as FD and CLIENT_KEY the key the client sent in its handshake (its options, such as
``-timeout=``, apply to the session).
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> int:
    """Serves the connection on FD, then closes it."""
    from ..rpc.server import serve_session_process

    fd, client_key = int(argv[0]), argv[1]
    try:
        libraries = argv[2] if len(argv) > 2 else ""
        return serve_session_process(
            "rpc.ServeAuthenticatedSocket", fd, client_key, libraries=libraries
        )
    finally:
        os.close(fd)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
