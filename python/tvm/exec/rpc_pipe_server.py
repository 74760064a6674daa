"""Serves one RPC session over two inherited pipes (started by :class:`tvm.rpc.PopenSession`).

Usage: ``python -m tvm.exec.rpc_pipe_server READ_FD WRITE_FD``.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    """Serves until the parent closes the pipe."""
    from ..rpc.server import serve_session_process

    return serve_session_process("rpc.ServePipe", int(argv[0]), int(argv[1]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
