"""Constants and socket helpers shared by the RPC client, server, tracker and proxy.

Two handshakes start every RPC connection:

* the data plane (servers, clients, the proxy): ``<i RPC_MAGIC``, ``<i key length``, the key in
  UTF-8; the answer is one of the ``RPC_CODE_*`` values, followed on success by the peer's key
  in the same length-prefixed form;
* the control plane (the tracker): ``<i RPC_TRACKER_MAGIC`` echoed back by the tracker, then
  JSON messages framed as ``<i byte length`` + UTF-8 text (:func:`sendjson`, :func:`recvjson`).

All integers are little-endian 32-bit.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import logging
import os
import random
import secrets
import socket
import struct
import time
from collections.abc import Container
from enum import IntEnum
from typing import Any

__all__ = [
    "AUTH_KEY_ENV",
    "MAX_TRACKER_MSG_BYTES",
    "RPC_CODE_BUSY",
    "RPC_CODE_DUPLICATE",
    "RPC_CODE_MISMATCH",
    "RPC_CODE_SUCCESS",
    "RPC_MAGIC",
    "RPC_SESS_MASK",
    "RPC_TRACKER_MAGIC",
    "RPC_TRACKER_MAGIC_AUTH",
    "TrackerCode",
    "check_auth_key",
    "connect_with_retry",
    "get_addr_family",
    "random_key",
    "recvall",
    "recvjson",
    "resolve_auth_key",
    "sendjson",
    "split_random_key",
    "tracker_handshake",
]

#: Magic number of the data-plane handshake; also the "accepted" reply.
RPC_MAGIC = 0xFF271
#: Magic number of the tracker handshake, echoed back by the tracker.
RPC_TRACKER_MAGIC = 0x2F271
#: Handshake reply: the key was accepted.
RPC_CODE_SUCCESS = RPC_MAGIC + 0
#: Handshake reply (proxy): a server with the same key is already waiting.
RPC_CODE_DUPLICATE = RPC_MAGIC + 1
#: Handshake reply: no server matches the key.
RPC_CODE_MISMATCH = RPC_MAGIC + 2
#: Handshake reply (this runtime's servers): the client authenticated, but the server is at its
#: limit of concurrent sessions or pending handshakes; try again later.
RPC_CODE_BUSY = RPC_MAGIC + 3
#: Environment variable holding the shared secret when none is passed.
AUTH_KEY_ENV = "TVM_RPC_KEY"
#: The tracker's reply to the magic when it has a shared secret: authenticate first.
RPC_TRACKER_MAGIC_AUTH = RPC_TRACKER_MAGIC + 1
#: Device types at or above this value denote a device of a remote session.
RPC_SESS_MASK = 128
#: Largest JSON frame the tracker accepts (and the helpers here send or receive).
MAX_TRACKER_MSG_BYTES = 1 << 20

logger = logging.getLogger("RPCServer")

_INT32 = struct.Struct("<i")


class TrackerCode(IntEnum):
    """The first element of every tracker request (and the value of simple replies)."""

    FAIL = -1
    SUCCESS = 0
    PING = 1
    STOP = 2
    PUT = 3
    REQUEST = 4
    UPDATE_INFO = 5
    SUMMARY = 6
    GET_PENDING_MATCHKEYS = 7
    #: Proof of the shared secret on a tracker that has one (see :func:`tracker_handshake`).
    AUTH = 8


def check_auth_key(key: object, source: str = "auth_key") -> str:
    """``key`` if it is a usable shared secret: a ``str`` that is not empty or whitespace.

    An empty or whitespace key is a ``ValueError`` naming the value (never "authentication
    off": leave the key unset for that); a non-string is a ``TypeError``.
    """
    if not isinstance(key, str):
        raise TypeError(f"{source} must be a str, got {type(key).__name__} {key!r}")
    if not key.strip():
        raise ValueError(
            f"{source} {key!r} is empty or whitespace: an authentication key must not be empty "
            "(leave it unset for no authentication)"
        )
    return key


def resolve_auth_key(auth_key: str | None) -> str | None:
    """The shared secret in force: ``auth_key`` if given, else ``TVM_RPC_KEY`` if it is set,
    else None; checked by :func:`check_auth_key` (a set but empty variable is an error)."""
    if auth_key is not None:
        return check_auth_key(auth_key)
    from_env = os.environ.get(AUTH_KEY_ENV)
    if from_env is None:
        return None
    return check_auth_key(from_env, AUTH_KEY_ENV)


#: Longest handshake key a server or proxy accepts.
MAX_KEY_BYTES = 4096
#: The option of a handshake key that announces this runtime's own protocol.
OWN_PROTOCOL_OPTION = "-protocol=0.9.0-tvm-rs"
#: Labels of the data-plane proofs (crates/tvm-rpc/src/handshake.rs); a proxy plays the
#: server's part of the handshake with both sides.
SERVER_PROOF = "tvm-rpc-server-proof"
CLIENT_PROOF = "tvm-rpc-client-proof"

#: Labels of the tracker's proofs (a client's proof is never valid as the tracker's).
TRACKER_CLIENT_PROOF = "tvm-rpc-tracker-client-proof"
TRACKER_PROOF = "tvm-rpc-tracker-proof"


def fresh_nonce() -> str:
    """16 random bytes, in hex."""
    return secrets.token_hex(16)


def auth_proof(auth_key: str, label: str, *nonces: str) -> str:
    """``HMAC-SHA256(auth_key, label 0x00 nonce 0x00 nonce ...)`` in hex: the proof of the
    shared secret over fresh nonces that the tracker and the proxy exchange."""
    message = "\0".join([label, *nonces]).encode("utf-8")
    return hmac.new(auth_key.encode("utf-8"), message, hashlib.sha256).hexdigest()


def proof_matches(expected: str, given: object) -> bool:
    """Whether ``given`` is the proof ``expected`` (compared in constant time)."""
    return isinstance(given, str) and hmac.compare_digest(expected, given)


def tracker_handshake(sock: socket.socket, addr: object, auth_key: str | None) -> None:
    """Opens the control plane on a socket connected to a tracker: sends the magic and, when
    the tracker answers that it has a shared secret (:data:`RPC_TRACKER_MAGIC_AUTH`), proves
    ``auth_key`` and checks that the tracker proves the same:

    tracker → ``[AUTH, Nt]``; client → ``[AUTH, Nc, HMAC(K, TRACKER_CLIENT_PROOF, Nt, Nc)]``;
    tracker → ``[SUCCESS, HMAC(K, TRACKER_PROOF, Nt, Nc)]`` (or ``FAIL``, and it closes).

    ``RuntimeError`` naming ``addr`` if the peer is not a tracker, or if either side fails to
    prove the key (a keyed tracker and a client without a key included)."""
    sock.sendall(_INT32.pack(RPC_TRACKER_MAGIC))
    try:
        (magic,) = _INT32.unpack(recvall(sock, 4))
    except OSError as err:
        raise RuntimeError(f"{addr!s} is not RPC Tracker: {err}") from err
    if magic == RPC_TRACKER_MAGIC:
        return
    if magic != RPC_TRACKER_MAGIC_AUTH:
        raise RuntimeError(f"{addr!s} is not RPC Tracker")
    if auth_key is None:
        raise RuntimeError(
            f"the tracker at {addr!s} requires an authentication key: pass auth_key or set "
            f"{AUTH_KEY_ENV}"
        )
    challenge = recvjson(sock)
    if not (
        isinstance(challenge, list) and len(challenge) == 2 and challenge[0] == TrackerCode.AUTH
    ):
        raise RuntimeError(f"the tracker at {addr!s} sent a malformed challenge")
    tracker_nonce, client_nonce = str(challenge[1]), fresh_nonce()
    proof = auth_proof(auth_key, TRACKER_CLIENT_PROOF, tracker_nonce, client_nonce)
    sendjson(sock, [TrackerCode.AUTH, client_nonce, proof])
    reply = recvjson(sock)
    expected = auth_proof(auth_key, TRACKER_PROOF, tracker_nonce, client_nonce)
    if not (isinstance(reply, list) and len(reply) == 2 and reply[0] == TrackerCode.SUCCESS):
        raise RuntimeError(f"the tracker at {addr!s} refused the authentication key")
    if not proof_matches(expected, reply[1]):
        raise RuntimeError(
            f"the tracker at {addr!s} failed to prove that it holds the authentication key"
        )


def get_addr_family(addr: tuple[str, int]) -> socket.AddressFamily:
    """The address family of the first address ``addr`` resolves to.

    Name ``"127.0.0.1"`` or ``"::1"`` explicitly to force IPv4 or IPv6.
    """
    infos = socket.getaddrinfo(addr[0], addr[1], 0, 0, socket.IPPROTO_TCP)
    return infos[0][0]


def recvall(sock: socket.socket, nbytes: int) -> bytes:
    """Receives exactly ``nbytes`` bytes from ``sock``.

    Raises ``ConnectionError`` (an ``OSError``) naming how many bytes were expected if the peer
    closes the connection first.
    """
    buffer = bytearray(nbytes)
    view = memoryview(buffer)
    received = 0
    while received < nbytes:
        count = sock.recv_into(view[received:], nbytes - received)
        if count == 0:
            raise ConnectionError(
                f"connection closed by the peer after {received} of {nbytes} expected bytes"
            )
        received += count
    return bytes(buffer)


def sendjson(sock: socket.socket, data: Any) -> None:
    """Sends ``data`` as one JSON frame: ``<i`` byte length, then the UTF-8 text.

    The length is the number of encoded bytes. (Apache TVM sends the number of characters of
    the JSON string, which is the same for ASCII text, and ``json.dumps`` escapes everything
    else by default; the byte count is what a reader needs for any text.) A frame larger than
    :data:`MAX_TRACKER_MSG_BYTES`, which a tracker would refuse, raises ``ValueError``.
    """
    payload = json.dumps(data).encode("utf-8")
    if len(payload) > MAX_TRACKER_MSG_BYTES:
        raise ValueError(
            f"JSON message of {len(payload)} bytes exceeds the limit of "
            f"{MAX_TRACKER_MSG_BYTES} bytes"
        )
    sock.sendall(_INT32.pack(len(payload)) + payload)


def recvjson(sock: socket.socket) -> Any:
    """Receives one JSON frame sent by :func:`sendjson` (or a tracker) and decodes it.

    A frame size that is not in ``1..MAX_TRACKER_MSG_BYTES`` means the stream is corrupt or not
    a tracker's: ``ConnectionError`` naming the size.
    """
    (size,) = _INT32.unpack(recvall(sock, 4))
    if size <= 0 or size > MAX_TRACKER_MSG_BYTES:
        raise ConnectionError(
            f"invalid JSON frame size {size} (must be 1..{MAX_TRACKER_MSG_BYTES} bytes)"
        )
    return json.loads(recvall(sock, size).decode("utf-8"))


def random_key(prefix: str, delimiter: str = ":", cmap: Container[str] | None = None) -> str:
    """``prefix``, ``delimiter`` and a random number, retried until the key is not in
    ``cmap``."""
    while True:
        key = f"{prefix}{delimiter}{random.random()}"
        if not cmap or key not in cmap:
            return key


def split_random_key(key: str, delimiter: str = ":") -> list[str]:
    """Splits a key made by :func:`random_key` into ``[prefix, random part]``.

    Only the last delimiter counts, so prefixes may contain it (``"127.0.0.1:5555"``).
    """
    return key.rsplit(delimiter, 1)


def connect_with_retry(
    addr: tuple[str, int], timeout: float = 60, retry_period: float = 5
) -> socket.socket:
    """Connects a TCP socket to ``addr``, retrying while the connection is refused.

    Meant to ride out a short restart of the peer: other errors are raised at once, and after
    ``timeout`` seconds of refusals ``RuntimeError("Failed to connect to server <addr>")``.
    """
    start = time.monotonic()
    attempts = 0
    while True:
        sock = socket.socket(get_addr_family(addr), socket.SOCK_STREAM)
        try:
            sock.connect(addr)
            return sock
        except OSError as err:
            sock.close()
            if err.errno != errno.ECONNREFUSED:
                raise
            waited = time.monotonic() - start
            if waited > timeout:
                raise RuntimeError(f"Failed to connect to server {addr!s}") from err
            # One line for the whole wait, not one per attempt.
            log = logger.warning if attempts == 0 else logger.debug
            log("Cannot connect to %s; retrying every %g s for %g s", addr, retry_period, timeout)
            attempts += 1
            time.sleep(retry_period)
