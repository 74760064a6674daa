"""Serves one RPC session over two inherited pipes (started by :class:`tvm.rpc.PopenSession`).

Usage: ``python -m tvm.exec.rpc_pipe_server READ_FD WRITE_FD``.
"""

from __future__ import annotations

import shutil
import sys
import tempfile


def main(argv: list[str]) -> int:
    """Serves in a fresh work directory until the parent closes the pipe."""
    read_fd, write_fd = int(argv[0]), int(argv[1])
    from tvm.ffi import get_global_func

    from ..rpc import testing  # noqa: F401  (registers rpc.test.* for clients)
    from ..rpc.server import import_init_modules

    import_init_modules()

    work = tempfile.mkdtemp(prefix="tvm-rpc-")
    try:
        set_work_dir = get_global_func("rpc.SetWorkDirectory")
        serve = get_global_func("rpc.ServePipe")
        assert set_work_dir is not None and serve is not None
        set_work_dir(work)
        serve.release_gil = True
        serve(read_fd, write_fd)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
