"""Serves one accepted RPC connection (started by the server for each client; internal).

Usage: ``python -m tvm.exec.rpc_session FD KEY [LIBRARIES]``, with the socket inherited as FD.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import sys
import tempfile


def main(argv: list[str]) -> int:
    """Loads the requested libraries, then serves the connection in a fresh work directory."""
    fd, key = int(argv[0]), argv[1]
    import tvm
    from tvm.ffi import get_global_func

    from ..rpc import testing  # noqa: F401  (registers rpc.test.* for clients)
    from ..rpc.server import import_init_modules

    import_init_modules()

    paths = argv[2].split(":") if len(argv) > 2 else []
    libraries = [ctypes.CDLL(p, ctypes.RTLD_GLOBAL) for p in paths]
    work = tempfile.mkdtemp(prefix="tvm-rpc-")
    try:
        set_work_dir = get_global_func("rpc.SetWorkDirectory")
        serve = get_global_func("rpc.ServeSocket")
        assert set_work_dir is not None and serve is not None
        set_work_dir(work)
        # The loop waits on the socket: other threads of this interpreter keep running.
        serve.release_gil = True
        serve(fd, key)
    except tvm.error.RPCError:
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
        os.close(fd)
        del libraries
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
