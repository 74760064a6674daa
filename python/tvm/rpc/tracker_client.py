"""The client side of the tracker: :class:`TrackerSession` and :func:`connect_tracker`."""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..error import RPCError
from ..support._exit_guard import suppress_at_exit
from . import base
from .base import TrackerCode

__all__ = ["TrackerSession", "connect_tracker"]

T = TypeVar("T")

_INT32 = struct.Struct("<i")

#: Seconds between the checks of a waiting request for servers of its key.
_KEY_CHECK_PERIOD = 1.0

#: Seconds a request waits before it says, once, that it is waiting.
_WAIT_NOTICE = 10.0


class _NoSuchKey(Exception):
    """No server of the requested key is registered (not worth another attempt)."""


class TrackerSession:
    """A connection to an RPC tracker.

    Parameters
    ----------
    addr
        ``(host, port)`` of the tracker. The connection is retried for a while if it is refused
        (:func:`tvm.rpc.base.connect_with_retry`) for ``connect_timeout`` seconds, then an
        :class:`~tvm.error.RPCError` naming it; ``RuntimeError`` if the peer is not a tracker.
    auth_key
        The shared secret of a tracker that has one (default: ``TVM_RPC_KEY`` if set); it is
        also the key of the sessions :meth:`request` opens. ``RuntimeError`` if the tracker
        requires a key and this one is missing or wrong, or if the tracker fails to prove it.

    Usable as a context manager, which closes the connection on exit.
    """

    def __init__(
        self, addr: tuple[str, int], auth_key: str | None = None, connect_timeout: float = 10
    ) -> None:
        self._addr = addr
        self._sock: Any = None
        self._auth_key = base.resolve_auth_key(auth_key)
        self._connect_timeout = connect_timeout
        self._connect()

    def _connect(self) -> None:
        try:
            sock = base.connect_with_retry(
                self._addr, timeout=self._connect_timeout, retry_period=1
            )
        except (RuntimeError, OSError) as err:
            host, port = self._addr
            raise RPCError(
                f"cannot connect to the tracker at {host}:{port} ({err.__cause__ or err}; "
                f"tried for {self._connect_timeout:g} s): is it running, on that port?"
            ) from None
        try:
            base.tracker_handshake(sock, self._addr, self._auth_key)
        except BaseException:
            sock.close()
            raise
        self._sock = sock

    def close(self) -> None:
        """Closes the connection to the tracker (a later request reconnects)."""
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    def __enter__(self) -> TrackerSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            with suppress_at_exit():
                self.close()
        except (TypeError, ImportError, AttributeError):
            pass

    def _call(self, request: list[Any]) -> Any:
        if self._sock is None:
            self._connect()
        base.sendjson(self._sock, request)
        return base.recvjson(self._sock)

    def ping(self) -> bool:
        """Whether the tracker answers a PING."""
        return bool(self._call([TrackerCode.PING]) == TrackerCode.SUCCESS)

    def summary(self) -> dict[str, Any]:
        """The tracker's state: ``{"queue_info": {key: {"free": n, "pending": m}},
        "server_info": [{"key": "server:<key>", "addr": [host, port]}, ...]}``."""
        value = self._call([TrackerCode.SUMMARY])
        if not isinstance(value, list) or len(value) != 2 or value[0] != TrackerCode.SUCCESS:
            raise RPCError(f"the tracker answered SUMMARY with {value!s}")
        result: dict[str, Any] = value[1]
        return result

    def text_summary(self) -> str:
        """The summary as a table of servers and a table of queues."""
        data = self.summary()
        lines = [
            "Server List",
            "------------------------------",
            "server-address           key",
            "------------------------------",
        ]
        servers_per_key: dict[str, int] = {}
        for item in sorted(data["server_info"], key=lambda x: str(x["key"])):
            addr = ":".join(str(part) for part in item["addr"])
            lines.append(f"{addr:21s}    {item['key']}")
            # "server:rasp3b" counts for "rasp3b"
            parts = str(item["key"]).split(":")
            key = parts[1] if len(parts) > 1 else parts[0]
            servers_per_key[key] = servers_per_key.get(key, 0) + 1
        lines += ["------------------------------", "", "Queue Status"]
        queues = data["queue_info"]
        keys = sorted(queues)
        width = max((len(k) for k in keys), default=0)
        title = f"{'key':<{width}s}   total  free  pending"
        rule = "-" * (len(title) + 1)
        lines += [rule, title, rule]
        for key in keys:
            total = servers_per_key.get(key, 0)
            free, pending = queues[key]["free"], queues[key]["pending"]
            if total or pending:
                lines.append(f"{key:<{width}}   {total:<5d}  {free:<4d}  {pending:<7d}")
        lines.append(rule)
        return "\n".join(lines) + "\n"

    def request(
        self,
        key: str,
        priority: int = 1,
        session_timeout: float = 0,
        max_retry: int = 5,
        session_constructor_args: Sequence[Any] | None = None,
        wait_for_key: float | None = 30,
    ) -> Any:
        """A session on a server of ``key``, waiting until the tracker has one free.

        Parameters
        ----------
        key
            The device key the servers registered with.
        priority
            Requests of higher priority are served first.
        session_timeout
            Seconds after which the server may end the session; 0 for never.
        max_retry
            Attempts before giving up with :class:`~tvm.error.RPCError`; a lost tracker
            connection is reopened on the next attempt.
        session_constructor_args
            The remote session's constructor name and its arguments (see
            :func:`tvm.rpc.connect`).
        wait_for_key
            Seconds to wait while no server of ``key`` is registered at all (a mistyped key,
            say) before an :class:`~tvm.error.RPCError` that lists the keys the tracker knows;
            None waits for ever. While servers of ``key`` exist but are busy, the request waits
            for one as long as it takes.
        """
        # client.py is imported here: it needs the native RPC functions, the tracker does not.
        from .client import connect  # type: ignore[import-not-found, unused-ignore]

        last_error: Exception | None = None
        for _ in range(max_retry):
            try:
                value = self._wait_for_server(key, priority, wait_for_key)
                if not isinstance(value, list) or len(value) != 2 or value[0] != 0:
                    raise RPCError(f"the tracker answered REQUEST with {value!s}")
                url, port, matchkey = value[1]
                return connect(
                    url,
                    port,
                    matchkey,
                    session_timeout=session_timeout,
                    session_constructor_args=session_constructor_args,
                    auth_key=self._auth_key,
                )
            except _NoSuchKey as err:
                raise RPCError(str(err)) from None
            except OSError as err:
                self.close()
                last_error = err
            except RuntimeError as err:
                last_error = err
        raise RPCError(f"Cannot request {key} after {max_retry} retry, last_error:{last_error!s}")

    def _wait_for_server(self, key: str, priority: int, wait_for_key: float | None) -> Any:
        """Sends REQUEST and reads its answer, checking every second (through a second
        connection) whether any server of ``key`` is registered; ``_NoSuchKey`` once none has
        been for ``wait_for_key`` seconds (the request is withdrawn: its connection closes)."""
        import select

        if self._sock is None:
            self._connect()
        base.sendjson(self._sock, [TrackerCode.REQUEST, key, "", priority])
        start = missing_since = time.monotonic()
        told = False
        while True:
            readable, _, _ = select.select([self._sock], [], [], _KEY_CHECK_PERIOD)
            if readable:
                if told:
                    base.logger.info(
                        "got a server of key %r after %.0f s", key, time.monotonic() - start
                    )
                return base.recvjson(self._sock)
            if not told and time.monotonic() - start >= _WAIT_NOTICE:
                told = True
                base.logger.warning(
                    "waiting for a free server of key %r at the tracker %s:%s (all busy or none "
                    "yet)",
                    key,
                    *self._addr,
                )
            if wait_for_key is None:
                continue
            known = self._known_keys()
            if key in known:
                missing_since = time.monotonic()
            elif time.monotonic() - missing_since >= wait_for_key:
                self.close()
                host, port = self._addr
                listed = ", ".join(repr(k) for k in sorted(known)) or "none"
                raise _NoSuchKey(
                    f"the tracker at {host}:{port} has no server with key {key!r} (waited "
                    f"{wait_for_key:g} s; the keys it knows: {listed})"
                )

    def _known_keys(self) -> set[str]:
        """The keys of the servers registered with the tracker (a proxy's servers included)."""
        with TrackerSession(self._addr, self._auth_key, self._connect_timeout) as other:
            summary = other.summary()
        keys = {k for k, queue in summary["queue_info"].items() if queue.get("free")}
        for item in summary["server_info"]:
            name = str(item.get("key", "")).split(":", 1)[-1]
            if name.startswith("proxy[") and name.endswith("]"):
                keys.update(k for k in name[len("proxy[") : -1].split(",") if k)
            elif name:
                keys.add(name)
        return keys

    def request_and_run(
        self,
        key: str,
        func: Callable[[Any], T],
        priority: int = 1,
        session_timeout: float = 0,
        max_retry: int = 2,
    ) -> T:
        """Runs ``func(session)`` on a session of ``key``; if it raises ``RuntimeError`` (a
        server that dropped out), runs it again on a new session, up to ``max_retry`` times.

        An error after 95% of ``session_timeout`` is taken as the session's end:
        ``RuntimeError("Session timeout when running <func>")``.
        """
        last_error: Exception | None = None
        name = getattr(func, "__name__", repr(func))
        for _ in range(max_retry):
            start = time.monotonic()
            try:
                session = self.request(key, priority=priority, session_timeout=session_timeout)
                start = time.monotonic()
                return func(session)
            except RuntimeError as err:
                elapsed = time.monotonic() - start
                if session_timeout and elapsed >= session_timeout * 0.95:
                    raise RuntimeError(f"Session timeout when running {name}") from err
                last_error = err
        raise RuntimeError(
            f"Failed to run on {key} after {max_retry} retry, last_error:{last_error!s}"
        )


def connect_tracker(
    url: str, port: int, auth_key: str | None = None, connect_timeout: float = 10
) -> TrackerSession:
    """A :class:`TrackerSession` with the tracker at ``url:port`` (``auth_key``: the shared
    secret of a tracker that has one; default ``TVM_RPC_KEY``). A refused connection is
    retried for ``connect_timeout`` seconds, then an :class:`~tvm.error.RPCError`."""
    return TrackerSession((url, port), auth_key, connect_timeout)
