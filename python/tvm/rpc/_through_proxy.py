"""A server behind a proxy (``Server(is_proxy=True)``, ``rpc_server --through-proxy``): it
connects out to the proxy, registers as ``server:<key>``, and serves the session the proxy
pairs it with; then it registers again. One session at a time, as Apache TVM's server does, so
that a proxy with a tracker never offers it while it is busy.

Registration (see :mod:`tvm.rpc.proxy`): ``<i RPC_MAGIC``, ``<i`` length, ``server:<key>
-protocol=<own>``; with a shared secret the server adds ``-cnonce=<Nc>`` and plays the client's
part of the mutual proof with the proxy (which plays the server's part with every peer): it
checks the proxy's proof over ``Nc`` and the proxy's nonce, then sends its own 32-byte proof.
When a client is paired, the proxy sends ``<i RPC_CODE_SUCCESS`` and the client's key, and
forwards bytes from then on; ``RPC_CODE_MISMATCH`` means no client came in time (register
again), ``RPC_CODE_DUPLICATE`` that another server waits under the same key.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import threading

from . import base
from ._zygote import SessionZygote, ZygoteError

_logger = logging.getLogger("RPCServer")

_INT32 = struct.Struct("<i")

#: Seconds the proxy has to answer each step of the registration.
REGISTER_TIMEOUT = 10.0
#: The longest wait between two attempts to reach a proxy that failed.
MAX_RETRY_PERIOD = 30.0


class ProxyRefused(RuntimeError):
    """The proxy refused this server (or is not a proxy, or failed to prove the key)."""


def _key_message(code: int, key: str) -> bytes:
    raw = key.encode("utf-8")
    return _INT32.pack(code) + _INT32.pack(len(raw)) + raw


def _read_key(sock: socket.socket, addr: tuple[str, int]) -> str:
    (length,) = _INT32.unpack(base.recvall(sock, 4))
    if not 0 <= length <= base.MAX_KEY_BYTES:
        raise ProxyRefused(f"{addr[0]}:{addr[1]} sent a key of invalid length {length}")
    return base.recvall(sock, length).decode("utf-8", errors="replace")


def _options(key: str) -> dict[str, str]:
    """The ``-name=value`` options of a handshake key."""
    found = {}
    for word in key.split()[1:]:
        name, sep, value = word.partition("=")
        if sep and name.startswith("-"):
            found[name[1:]] = value
    return found


def open_registration(
    addr: tuple[str, int], key: str, auth_key: str | None, timeout: float = REGISTER_TIMEOUT
) -> socket.socket:
    """Connects to the proxy at ``addr`` and registers as ``server:<key>`` (with ``auth_key``,
    after the mutual proof of the key). Returns the socket, waiting to be paired. ``OSError``
    if the proxy cannot be reached; :class:`ProxyRefused` if it refuses this server or fails to
    prove the key."""
    where = f"{addr[0]}:{addr[1]}"
    sock = socket.create_connection(addr, timeout=timeout)
    try:
        # A proxy that vanishes while the server waits to be paired is noticed eventually.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        nonce = base.fresh_nonce() if auth_key is not None else None
        hello = f"server:{key} {base.OWN_PROTOCOL_OPTION}"
        if nonce is not None:
            hello += f" -cnonce={nonce}"
        sock.sendall(_key_message(base.RPC_MAGIC, hello))
        if auth_key is not None and nonce is not None:
            try:
                (code,) = _INT32.unpack(base.recvall(sock, 4))
            except socket.timeout:
                raise ProxyRefused(
                    f"the proxy at {where} did not answer the proof of the authentication key "
                    f"within {timeout:g} s (a proxy without a key answers nothing)"
                ) from None
            if code == base.RPC_CODE_MISMATCH:
                raise ProxyRefused(f"the proxy at {where} refused this server")
            if code != base.RPC_MAGIC:
                raise ProxyRefused(f"{where} is not an RPC proxy (it answered {code:#x})")
            options = _options(_read_key(sock, addr))
            proxy_nonce, proof = options.get("nonce"), options.get("proof")
            expected = base.auth_proof(auth_key, base.SERVER_PROOF, nonce, proxy_nonce or "")
            if proxy_nonce is None or not base.proof_matches(expected, proof):
                raise ProxyRefused(
                    f"the proxy at {where} failed to prove that it holds the authentication key"
                )
            answer = base.auth_proof(auth_key, base.CLIENT_PROOF, nonce, proxy_nonce)
            sock.sendall(bytes.fromhex(answer))
        sock.settimeout(None)
        return sock
    except BaseException:
        sock.close()
        raise


def wait_for_client(sock: socket.socket, addr: tuple[str, int], key: str) -> str | None:
    """Waits on a registered socket until the proxy pairs it with a client; returns the
    client's key, or None when no client came in time (register again). ``OSError`` if the
    connection is lost; :class:`ProxyRefused` if the proxy refuses this server."""
    where = f"{addr[0]}:{addr[1]}"
    (code,) = _INT32.unpack(base.recvall(sock, 4))
    if code == base.RPC_CODE_MISMATCH:
        return None
    if code == base.RPC_CODE_DUPLICATE:
        raise ProxyRefused(f"the proxy at {where} already has a server with key {key!r}")
    if code == base.RPC_CODE_BUSY:
        raise ProxyRefused(f"the proxy at {where} has too many servers waiting")
    if code != base.RPC_CODE_SUCCESS:
        raise ProxyRefused(f"{where} is not an RPC proxy (it answered {code:#x})")
    client_key = _read_key(sock, addr)
    options = _options(client_key)
    if "auth" in options or "nonce" in options:
        raise ProxyRefused(
            f"the proxy at {where} requires an authentication key: pass auth_key or set "
            f"{base.AUTH_KEY_ENV}"
        )
    if not client_key.startswith("client:"):
        raise ProxyRefused(f"the proxy at {where} paired this server with {client_key[:100]!r}")
    return client_key


class ProxyServing:
    """The loop of a server behind the proxy at ``addr``: registers, waits to be paired, hands
    the session to ``zygote``, waits for it to end, registers again. A lost or refusing proxy
    is tried again with growing delays (one log line each)."""

    def __init__(
        self, addr: tuple[str, int], key: str, auth_key: str | None, zygote: SessionZygote
    ) -> None:
        self.addr = addr
        self.key = key
        self.auth_key = auth_key
        self.zygote = zygote
        self._lock = threading.Lock()
        self._current: int | None = None
        self._ended = threading.Event()
        self._stopping = threading.Event()
        self._sock: socket.socket | None = None

    def session_ended(self, ident: int, status: int | None) -> None:
        """The zygote's report of a session's end."""
        with self._lock:
            if ident == self._current:
                self._current = None
                self._ended.set()

    def wait_idle(self, timeout: float) -> bool:
        """Whether no session runs, waiting up to ``timeout`` s for the current one to end."""
        with self._lock:
            if self._current is None:
                return True
        return self._ended.wait(timeout)

    def run(self, first: socket.socket | None = None) -> None:
        """Serves until :meth:`stop`; ``first`` is an already registered socket."""
        sock, delay = first, 0.0
        while not self._stopping.is_set():
            try:
                if sock is None:
                    sock = open_registration(self.addr, self.key, self.auth_key)
                with self._lock:
                    self._sock = sock
                if self._stopping.is_set():
                    break
                client_key = wait_for_client(sock, self.addr, self.key)
            except (OSError, ProxyRefused) as err:
                if self._stopping.is_set():
                    break
                delay = min(max(2 * delay, 0.5), MAX_RETRY_PERIOD)
                why = str(err) or type(err).__name__
                _logger.warning("proxy %s:%d: %s; trying again in %g s", *self.addr, why, delay)
                self._drop(sock)
                sock = None
                self._stopping.wait(delay)
                continue
            if client_key is None:  # nobody came in time: register afresh
                self._drop(sock)
                sock = None
                continue
            delay = 0.0
            with self._lock:
                self._sock = None
                self._ended.clear()
                try:
                    self._current = self.zygote.submit(sock, client_key)  # closes sock
                except (OSError, ZygoteError) as err:
                    _logger.warning("cannot start a session for %s: %s", client_key, err)
                    self._ended.set()
            sock = None
            self._ended.wait()
        self._drop(sock)

    def _drop(self, sock: socket.socket | None) -> None:
        with self._lock:
            self._sock = None
        if sock is not None:
            sock.close()

    def stop(self) -> None:
        """Stops registering (a session being served goes on); wakes a waiting :meth:`run`."""
        self._stopping.set()
        with self._lock:
            sock = self._sock
            if self._current is None:
                self._ended.set()
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
