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


class TrackerRegistration:
    """The server's registration with a tracker: it offers one match key at a time
    (``<key>:<random>``), which a client gets from the tracker and presents to this server; each
    accepted connection consumes it and a fresh one is offered. A key handed to a client that
    does not connect within ``matchkey_timeout`` seconds is replaced, so the server stays in the
    pool; a lost tracker connection is re-established while the server goes on serving."""

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
        self._taken_since: float | None = None
        self.sock: socket.socket | None = None
        # Handshake threads consume keys while the accept loop ticks.
        self._lock = threading.RLock()
        self._register(base.connect_with_retry(tracker_addr))

    def _register(self, sock: socket.socket) -> None:
        try:
            base.tracker_handshake(sock, self.addr, self.auth_key)
            self.sock = sock
            info = {"key": "server:" + self.key, "addr": [self.custom_addr, self.port]}
            self._expect_success([TrackerCode.UPDATE_INFO, info])
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

    def consume(self) -> None:
        """The offered key was used by an authenticated connection: offers the next one."""
        with self._lock:
            try:
                self.offer()
            except (OSError, RuntimeError, ValueError) as err:
                self._lose(err)

    def tick(self) -> None:
        """Called while the server is idle, every ``ping_period``: reconnects to a lost tracker,
        and replaces a key that a client took from the tracker but has not used in time."""
        try:
            if self.sock is None:
                self._register(socket.create_connection(self.addr, timeout=self.ping_period))
                _logger.info("registered again with the tracker at %s", self.addr)
                return
            pending = self._request([TrackerCode.GET_PENDING_MATCHKEYS])
            if not isinstance(pending, list):
                raise RuntimeError(f"the tracker answered {pending!r} to GET_PENDING_MATCHKEYS")
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
