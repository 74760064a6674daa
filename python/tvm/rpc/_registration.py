"""A server's registration with a tracker: the match keys it offers, kept fresh while it
serves."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time

from . import base
from .base import TrackerCode

_logger = logging.getLogger("RPCServer")

#: Seconds the tracker has to answer a request of the server.
_REPLY_TIMEOUT = 30.0


class TrackerRegistration:
    """The server's registration with a tracker: while it is free, it offers one match key
    (``<key>:<random>``), which a client gets from the tracker and presents to this server. A
    session started with it makes the server busy: it offers nothing (the tracker counts it as
    not free, and queues the next client) until the session ends, when a fresh key is offered.
    A key handed to a client that does not connect within ``matchkey_timeout`` seconds is
    replaced, so the server stays in the pool; a lost tracker connection is re-established
    while the server goes on serving."""

    def __init__(
        self,
        tracker_addr: tuple[str, int],
        key: str,
        port: int,
        custom_addr: str | None,
        matchkey_timeout: float = 5.0,
        auth_key: str | None = None,
    ) -> None:
        if not matchkey_timeout > 0:
            raise ValueError(f"matchkey_timeout must be positive, got {matchkey_timeout!r}")
        self.addr = tracker_addr
        self.key = key
        self.port = port
        self.custom_addr = custom_addr
        self.matchkey_timeout = matchkey_timeout
        #: The shared secret proven to a tracker that asks for one.
        self.auth_key = auth_key
        #: How often an idle server asks the tracker which of its keys are still pending.
        self.ping_period = min(2.0, matchkey_timeout / 2)
        self.matchkey = ""
        #: Whether a session runs (no key is on offer then).
        self.busy = False
        self._taken_since: float | None = None
        self.sock: socket.socket | None = None
        # Sessions begin and end on other threads than the accept loop's ticks.
        self._lock = threading.RLock()
        self._register(base.connect_with_retry(tracker_addr))

    def _register(self, sock: socket.socket) -> None:
        try:
            # A tracker that stops answering is a lost tracker, not a hung server.
            sock.settimeout(_REPLY_TIMEOUT)
            base.tracker_handshake(sock, self.addr, self.auth_key)
            self.sock = sock
            info = {"key": "server:" + self.key, "addr": [self.custom_addr, self.port]}
            self._expect_success([TrackerCode.UPDATE_INFO, info])
            if not self.busy:
                self.offer()
        except BaseException:
            self.sock = None
            sock.close()
            raise

    def _request(self, request: list[object]) -> object:
        if self.sock is None:
            raise ConnectionError(f"not connected to the tracker at {self.addr}")
        base.sendjson(self.sock, request)
        return base.recvjson(self.sock)

    def _expect_success(self, request: list[object]) -> None:
        reply = self._request(request)
        if reply != TrackerCode.SUCCESS:
            raise RuntimeError(f"the tracker refused {request[0]!r}: {reply!r}")

    def offer(self) -> str:
        """Offers a fresh match key; returns it."""
        self.matchkey = base.random_key(self.key, cmap={self.matchkey})
        self._taken_since = None
        self._expect_success(
            [TrackerCode.PUT, self.key, [self.port, self.matchkey], self.custom_addr]
        )
        return self.matchkey

    def begin_session(self) -> None:
        """A client's session started with the offered key: the server is busy, offering
        nothing until :meth:`end_session`."""
        with self._lock:
            self.busy = True
            self._taken_since = None

    def end_session(self) -> None:
        """The session ended: the used key is retired and a fresh one offered."""
        with self._lock:
            self.busy = False
            try:
                self.offer()
            except (OSError, RuntimeError, ValueError) as err:
                self._lose(err)

    def tick(self) -> None:
        """Called every ``ping_period`` while no connection arrives: reconnects to a lost
        tracker and, while the server is free, replaces a key that a client took from the
        tracker but has not used in time."""
        with self._lock:
            try:
                if self.sock is None:
                    self._register(socket.create_connection(self.addr, timeout=self.ping_period))
                    _logger.info("registered again with the tracker at %s", self.addr)
                    return
                pending = self._request([TrackerCode.GET_PENDING_MATCHKEYS])
                if not isinstance(pending, list):
                    raise RuntimeError(f"the tracker answered {pending!r} to GET_PENDING_MATCHKEYS")
                if self.busy:  # the used key is not on offer, and no other is
                    return
                now = time.monotonic()
                if self.matchkey in pending:
                    self._taken_since = None
                elif self._taken_since is None:
                    self._taken_since = now
                elif now - self._taken_since >= self.matchkey_timeout:
                    _logger.info("match key %s went unused; offering a new one", self.matchkey)
                    self.offer()
            except (OSError, RuntimeError, ValueError) as err:
                self._lose(err)

    def _lose(self, err: Exception) -> None:
        if self.sock is not None:
            _logger.warning("lost the tracker at %s (%s); reconnecting", self.addr, err)
            with contextlib.suppress(OSError):
                self.sock.close()
        self.sock = None
