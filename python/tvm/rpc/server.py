"""RPC servers: a listening socket in a worker process, each client session in a process of
its own (a crashing kernel ends only its session).

The server runs code its clients send: bind it to the loopback address (the default) or a
trusted network only.
"""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence

from ..support.popen_pool import PopenWorker

__all__ = ["Server", "bind_socket", "serve_forever"]


def bind_socket(host: str, port: int, port_end: int, reuse_addr: bool = True) -> socket.socket:
    """A listening socket on the first free port of ``[port, port_end)`` (``port=0``: any
    free port). Only ports in use are skipped; no free port is a ``ValueError``."""
    family = socket.getaddrinfo(host, None)[0][0]
    candidates = [0] if port == 0 else range(port, max(port_end, port + 1))
    for candidate in candidates:
        sock = socket.socket(family, socket.SOCK_STREAM)
        if reuse_addr:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, candidate))
        except OSError as err:
            sock.close()
            if err.errno == errno.EADDRINUSE:
                continue
            raise
        sock.listen(64)
        return sock
    raise ValueError(f"cannot bind to any port in [{port}, {port_end})")


def _spawn_session(
    conn: socket.socket, key: str, load_library: str | None, auth_key: str | None
) -> None:
    """Serves one accepted connection in a fresh interpreter and reaps it when done. The
    shared secret travels in the environment (``TVM_RPC_KEY``), never on a command line."""
    fd = conn.fileno()
    command = [sys.executable, "-m", "tvm.exec.rpc_session", str(fd), key]
    if load_library:
        command.append(load_library)
    env = dict(os.environ)
    if auth_key is not None:
        env["TVM_RPC_KEY"] = auth_key
    try:
        child = subprocess.Popen(command, pass_fds=[fd], stdin=subprocess.DEVNULL, env=env)
    finally:
        conn.close()
    threading.Thread(target=child.wait, daemon=True).start()


def serve_forever(
    sock: socket.socket,
    key: str = "",
    load_library: str | None = None,
    auth_key: str | None = None,
) -> None:
    """Accepts connections on ``sock`` and serves each in a session process of its own.
    ``auth_key`` (default: ``TVM_RPC_KEY``) is the secret clients must prove they hold."""
    while True:
        try:
            conn, _ = sock.accept()
        except OSError:
            return
        _spawn_session(conn, key, load_library, auth_key)


def _start_in_worker(
    host: str,
    port: int,
    port_end: int,
    key: str,
    load_library: str | None,
    reuse_addr: bool,
    server_init_callback: Callable[[], object] | None,
    auth_key: str | None,
) -> int:
    """Runs in the server's worker process: binds, starts accepting, returns the port."""
    if server_init_callback is not None:
        server_init_callback()
    sock = bind_socket(host, port, port_end, reuse_addr)
    threading.Thread(
        target=serve_forever, args=(sock, key, load_library, auth_key), daemon=True
    ).start()
    return int(sock.getsockname()[1])


class Server:
    """An RPC server in a worker process. Returns once the socket is bound; ``port`` is the
    real port (pass ``port=0`` for any free one). With ``auth_key`` (default: the
    ``TVM_RPC_KEY`` environment variable) only clients that prove they hold the same secret are
    served; Apache TVM's clients cannot, and are refused."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 9091,
        port_end: int = 9199,
        key: str = "",
        load_library: Sequence[str] | str | None = None,
        reuse_addr: bool = True,
        server_init_callback: Callable[[], object] | None = None,
        auth_key: str | None = None,
    ) -> None:
        if isinstance(load_library, (list, tuple)):
            load_library = ":".join(os.fspath(p) for p in load_library)
        self.host = host
        self.proc = PopenWorker()
        self.proc.send(
            _start_in_worker,
            [host, port, port_end, key, load_library, reuse_addr, server_init_callback, auth_key],
        )
        self.port: int = self.proc.recv()

    def terminate(self) -> None:
        """Stops the server and every session it is serving."""
        self.proc.kill()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.terminate()

    def __del__(self) -> None:
        try:
            self.terminate()
        except (ImportError, AttributeError):  # interpreter shutdown
            pass
